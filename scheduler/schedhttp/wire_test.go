package schedhttp_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

func TestWireShapes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	run := schedhttp.RunJSON{Job: "j", Slot: schedhttp.Time{Time: at}, Status: "failed", Attempt: 1,
		Attempts: []schedhttp.AttemptJSON{{N: 1, Token: 1 << 60, Status: "failed", Started: schedhttp.Time{Time: at.Add(12 * time.Millisecond)}}}}
	b, err := json.Marshal(run)
	require.NoError(t, err)
	require.JSONEq(t, `{"job":"j","slot":"2026-12-01T10:00:00.000Z","status":"failed","attempt":1,
		"attempts":[{"n":1,"token":"1152921504606846976","status":"failed","started":"2026-12-01T10:00:00.012Z"}]}`, string(b))
	var back schedhttp.RunJSON
	require.NoError(t, json.Unmarshal(b, &back))
	require.True(t, back.Slot.Equal(at))
	require.Equal(t, run.Attempts[0].Token, back.Attempts[0].Token)
	require.True(t, back.Attempts[0].Started.Equal(at.Add(12*time.Millisecond)))
	require.True(t, back.RetryAt.IsZero())
}
