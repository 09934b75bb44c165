package fence_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
)

// allVerbs are the fmt verbs a Holder is checked with: every one prints
// the masked form (Format). Before Format, %d printed the owner, as
// %!d(string=<owner>) (a fresh user's trial).
var allVerbs = []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x", "%X"}

// A Holder formatted by fmt or slog, alone or inside a value that holds
// it in an exported field, a slice or a map, shows its owner id, never
// its owner (a write capability; found by a fresh user's trial: a job's
// fmt.Errorf("%v", run.Holder()) reached the scheduler's admin API).
// Control: without String, %v prints the owner; without Format, %d does.
func TestHolderNeverFormatsItsOwner(t *testing.T) {
	t.Parallel()
	h := fence.Holder{Scope: "settle", Token: 1796557722000975, Owner: "c4cf6eb9f6f86911b62410cefdeb973e"}
	id := fence.OwnerID(h.Owner)
	type wrapper struct {
		Name string
		H    fence.Holder
	}
	for _, verb := range allVerbs {
		for _, v := range []any{h, &h, wrapper{"w", h}, &wrapper{"w", h}, []fence.Holder{h}, map[string]any{"h": h}} {
			got := fmt.Sprintf(verb, v)
			require.NotContains(t, got, h.Owner, "%s of %T", verb, v)
			require.Contains(t, got, id, "%s of %T", verb, v)
			require.Contains(t, got, "1796557722000975", "%s of %T", verb, v)
		}
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "holder", h)
	require.NotContains(t, buf.String(), h.Owner)
	require.Contains(t, buf.String(), `"holder":{"scope":"settle","token":1796557722000975,"owner_id":"`+id+`"}`)
	// encoding/json: alone, behind a pointer, in a struct or a list (it
	// printed the owner: a fresh user's trial).
	b, err := json.Marshal(map[string]any{"h": h, "p": &h, "w": wrapper{"w", h}, "l": []fence.Holder{h}})
	require.NoError(t, err)
	require.NotContains(t, string(b), h.Owner)
	require.Contains(t, string(b), `"h":{"Scope":"settle","Token":1796557722000975,"OwnerID":"`+id+`"}`)
	require.Equal(t, 4, strings.Count(string(b), `"OwnerID":"`+id+`"`), string(b))
}

// Widths, precision and the '-' flag apply to a Holder's masked form as
// to a string (they were ignored: a table printed with %-60v lost its
// columns), and %+q and %#q quote it as they quote a string. Control:
// the same directives on the String form print the same text.
func TestHolderFormatsWithWidthAndFlags(t *testing.T) {
	t.Parallel()
	h := fence.Holder{Scope: "settle", Token: 42, Owner: "c4cf6eb9f6f86911b62410cefdeb973e"}
	str := h.String()
	for _, tc := range []struct{ verb, asString string }{
		{"%80v|", "%80s|"}, {"%-80v|", "%-80s|"}, {"%.10v|", "%.10s|"}, {"%-80d|", "%-80s|"},
		{"%80q|", "%80q|"}, {"%+q|", "%+q|"}, {"%#q|", "%#q|"}, {"%x|", "%s|"},
	} {
		got := fmt.Sprintf(tc.verb, h)
		require.Equal(t, fmt.Sprintf(tc.asString, str), got, tc.verb)
		require.NotContains(t, got, h.Owner, tc.verb)
	}
	require.Len(t, fmt.Sprintf("%-80v", h), 80)
	require.Equal(t, h.GoString(), fmt.Sprintf("%#v", h))
}

// The documented limitation (String's doc, docs/security.md row 1): fmt
// prints a Holder in an unexported struct field by reflection, owner
// included, because it cannot call a method there. Should fmt ever change
// that, this test fails and the docs should be corrected.
func TestHolderInAnUnexportedFieldIsPrintedByReflection(t *testing.T) {
	t.Parallel()
	h := fence.Holder{Scope: "settle", Token: 42, Owner: "c4cf6eb9f6f86911b62410cefdeb973e"}
	type jobState struct {
		name   string
		holder fence.Holder
	}
	require.Equal(t, "{name:j holder:{Scope:settle Token:42 Owner:c4cf6eb9f6f86911b62410cefdeb973e}}", fmt.Sprintf("%+v", jobState{"j", h}))
	require.Contains(t, fmt.Sprintf("%v", &jobState{"j", h}), h.Owner)
	// A struct of the user's own with a String (or Format) method is not
	// printed by reflection.
	require.Equal(t, "j "+h.String(), fmt.Sprintf("%+v", maskedState{"j", h}))
	// %p, the verb for pointers, of a value: fmt reports the bad verb and
	// prints the value by reflection, calling no method (a fresh user's
	// trial; docs/security.md names it). Of a pointer it prints the address.
	require.Equal(t, "%!p(fence.Holder={settle 42 c4cf6eb9f6f86911b62410cefdeb973e})", fmt.Sprintf("%p", h))
	require.NotContains(t, fmt.Sprintf("%p", &h), h.Owner)
}

// maskedState keeps a Holder in an unexported field and formats itself.
type maskedState struct {
	name   string
	holder fence.Holder
}

func (s maskedState) String() string { return s.name + " " + s.holder.String() }

// A context that carries a holder (WithHolder, as a lease's Context does)
// formats it as an address, never field by field: its owner is in an
// unexported field of the context, where fmt calls no String method (a
// fresh user's trial found %#v of a lease's context leaking it).
func TestContextNeverFormatsItsHoldersOwner(t *testing.T) {
	t.Parallel()
	h := fence.Holder{Scope: "settle", Token: 1796557722000975, Owner: "c4cf6eb9f6f86911b62410cefdeb973e"}
	inner, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx := fence.WithHolder(inner, h) // as lease.Lease.Context: the holder outermost
	for _, verb := range allVerbs {
		for _, c := range []context.Context{ctx, context.WithValue(ctx, otherKey{}, 1)} {
			require.NotContains(t, fmt.Sprintf(verb, c), h.Owner, verb)
		}
	}
	got, ok := fence.HolderFromContext(ctx)
	require.True(t, ok)
	require.Equal(t, h, got)
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "ctx", ctx)
	require.NotContains(t, buf.String(), h.Owner)
}

// otherKey is a context key of the test's own.
type otherKey struct{}
