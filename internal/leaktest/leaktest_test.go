package leaktest_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/leaktest"
)

func TestShowingFindsTheLineAndCountCountsEntries(t *testing.T) {
	t.Parallel()
	var text leaktest.Text
	require.Empty(t, text.Showing("secret"))
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { text.Add(true, "evalsha sha 1 key [owner]") })
	}
	wg.Wait()
	text.Add(false, "set key s3cret")
	text.Add(true, "get key")
	require.Equal(t, 11, text.Count())
	require.Equal(t, "set key s3cret\n", text.Showing("nothing", "s3cret"))
	require.Empty(t, text.Showing("", "absent"), "an empty secret is skipped")
	require.Contains(t, text.String(), "[owner]\nevalsha")
}
