package ledger_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// plainAttempt and plainFence have the fields of Attempt and Fence and
// none of their methods: the control, printed by reflection.
type (
	plainAttempt ledger.Attempt
	plainFence   ledger.Fence
)

// A Fence, an Attempt and a Record, formatted by fmt with any verb or
// logged by slog's JSON handler, show owner ids and never an owner (a
// write capability: a user's fmt.Printf("%+v", rec) of a ledger record,
// or slog.Any("record", rec), printed every attempt's owner). Control: the
// same fields without the methods print the owners.
func TestLedgerValuesNeverFormatTheirOwners(t *testing.T) {
	t.Parallel()
	const unitOwner, slotOwner = "c4cf6eb9f6f86911b62410cefdeb973e", "0b1d5c9e7aa24f6e8d3c2b1a09f8e7d6"
	unitID, slotID := fence.OwnerID(unitOwner), fence.OwnerID(slotOwner)
	planner := ledger.Fence{Scope: "unit", Token: 1796557722000975, Owner: unitOwner, Holder: "replica-a"}
	f := ledger.Fence{Scope: "slot", Token: 1796557722000981, Owner: slotOwner, Holder: "replica-a", Planner: &planner}
	at := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	a := ledger.Attempt{N: 2, Token: 1796557722000981, Owner: slotOwner, Holder: "replica-a",
		Status: ledger.StatusFailed, Class: ledger.ClassRetryable, Error: "boom", Started: at, Heartbeat: at, Finished: at}
	rec := ledger.Record{Slot: ledger.Slot{Job: "settle", At: at}, Status: ledger.StatusFailed, Attempt: 2, Attempts: []ledger.Attempt{a}}

	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x", "%X"} {
		for _, v := range []any{f, &f, a, &a, rec, &rec, []ledger.Attempt{a}, map[string]any{"f": f}} {
			got := fmt.Sprintf(verb, v)
			require.NotContains(t, got, slotOwner, "%s of %T", verb, v)
			require.NotContains(t, got, unitOwner, "%s of %T", verb, v)
			require.Contains(t, got, slotID, "%s of %T", verb, v)
			require.Contains(t, got, "1796557722000981", "%s of %T", verb, v)
		}
		require.Contains(t, fmt.Sprintf(verb, f), unitID, "%s: the planner's owner id", verb)
	}
	require.Equal(t, `{Scope:"slot" Token:1796557722000981 OwnerID:`+slotID+` Holder:"replica-a" Planner:{Scope:"unit" Token:1796557722000975 OwnerID:`+unitID+` Holder:"replica-a"}}`, f.String())

	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "fence", f, "attempt", a, "record", rec)
	out := buf.String()
	require.NotContains(t, out, slotOwner)
	require.NotContains(t, out, unitOwner)
	require.Contains(t, out, `"planner":{"scope":"unit","token":1796557722000975,"owner_id":"`+unitID+`","holder":"replica-a"}`)
	require.Contains(t, out, `"record":{"slot":"settle:2026-12-07T08:00:00Z:","status":"failed","attempt":2,`)
	require.Contains(t, out, `"attempts":{"2":{"n":2,"token":1796557722000981,"owner_id":"`+slotID+`"`)

	// Control: without the methods, fmt and slog print the owners.
	require.Contains(t, fmt.Sprintf("%+v", plainAttempt(a)), slotOwner)
	require.Contains(t, fmt.Sprintf("%+v", plainFence(f)), slotOwner)
	buf.Reset()
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "attempt", plainAttempt(a))
	require.Contains(t, buf.String(), slotOwner)
}
