package ledger

import (
	"fmt"
	"log/slog"
	"strconv"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
)

// A Fence, an Attempt and a Record hold lease owners, write capabilities
// that go to sinks and nowhere else (docs/security.md): fmt and slog show
// their owner ids (fence.OwnerID), never the owners. As with fence.Holder,
// fmt cannot call these methods on a value in an unexported struct field,
// and encoding/json, which calls none of them, prints every field.

// String formats f for people: its scope, token, owner id and holder
// label, and its planner's, never an owner.
func (f Fence) String() string {
	s := fmt.Sprintf("{Scope:%q Token:%d OwnerID:%s Holder:%q", f.Scope, f.Token, fence.OwnerID(f.Owner), f.Holder)
	if f.Planner != nil {
		s += " Planner:" + f.Planner.String()
	}
	return s + "}"
}

// GoString is String, for fmt's %#v.
func (f Fence) GoString() string { return "ledger.Fence" + f.String() }

// Format implements fmt.Formatter: %#v prints GoString, %q String quoted,
// every other verb String, so that no verb prints an owner; widths, precision
// and flags apply as to a string.
func (f Fence) Format(s fmt.State, verb rune) {
	ownerarg.FormatMasked(s, verb, f.String(), f.GoString())
}

// LogValue implements slog.LogValuer: scope, token, owner_id, holder and
// the planner's, never an owner.
func (f Fence) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("scope", f.Scope), slog.Uint64("token", uint64(f.Token)),
		slog.String("owner_id", fence.OwnerID(f.Owner)), slog.String("holder", f.Holder)}
	if f.Planner != nil {
		attrs = append(attrs, slog.Any("planner", *f.Planner))
	}
	return slog.GroupValue(attrs...)
}

// String formats a for people: every field, with the owner id in place of
// the owner.
func (a Attempt) String() string {
	return fmt.Sprintf("{N:%d Token:%d OwnerID:%s Holder:%q Status:%s Class:%s Error:%q Started:%v Heartbeat:%v Finished:%v}",
		a.N, a.Token, fence.OwnerID(a.Owner), a.Holder, a.Status, a.Class, a.Error, a.Started, a.Heartbeat, a.Finished)
}

// GoString is String, for fmt's %#v.
func (a Attempt) GoString() string { return "ledger.Attempt" + a.String() }

// Format implements fmt.Formatter as Fence.Format does.
func (a Attempt) Format(s fmt.State, verb rune) {
	ownerarg.FormatMasked(s, verb, a.String(), a.GoString())
}

// LogValue implements slog.LogValuer: every field, owner_id in place of
// the owner; the times zero when not set.
func (a Attempt) LogValue() slog.Value {
	return slog.GroupValue(slog.Int("n", a.N), slog.Uint64("token", uint64(a.Token)),
		slog.String("owner_id", fence.OwnerID(a.Owner)), slog.String("holder", a.Holder),
		slog.String("status", string(a.Status)), slog.String("class", string(a.Class)), slog.String("error", a.Error),
		slog.Time("started", a.Started), slog.Time("heartbeat", a.Heartbeat), slog.Time("finished", a.Finished))
}

// LogValue implements slog.LogValuer: the slot's key, status, attempt,
// retry time and reason, and its attempts as a group keyed by attempt
// number (each Attempt.LogValue), so that a handler that encodes values
// as JSON never sees an Attempt's owner. fmt prints a Record field by
// field, each Attempt by its Format.
func (r Record) LogValue() slog.Value {
	attempts := make([]slog.Attr, len(r.Attempts))
	for i, a := range r.Attempts {
		attempts[i] = slog.Any(strconv.Itoa(a.N), a)
	}
	return slog.GroupValue(slog.String("slot", r.Slot.Key()), slog.String("status", string(r.Status)),
		slog.Int("attempt", r.Attempt), slog.Time("retry_at", r.RetryAt), slog.String("reason", r.Reason),
		slog.Attr{Key: "attempts", Value: slog.GroupValue(attempts...)})
}
