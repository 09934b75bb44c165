package fence

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOwnerID(t *testing.T) {
	t.Parallel()
	owner := "0123456789abcdef0123456789abcdef"
	// Fixed: views, logs and a CLI of another build must show the same id.
	want := "a1e11ea518c5"
	require.Equal(t, want, OwnerID(owner))
	require.Len(t, OwnerID(owner), OwnerIDLen)
	require.NotContains(t, OwnerID(owner), owner[:OwnerIDLen], "not a prefix of the owner")
	require.NotEqual(t, OwnerID(owner), OwnerID(owner+"0"))
	require.Equal(t, "", OwnerID(""), "no owner, no id")
	require.False(t, strings.ContainsAny(OwnerID("x"), "ABCDEFG-"), "lower-case hex")
}
