package fence

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/holdfast-go/holdfast/internal/ownerarg"
)

// Holder is what a writer presents to a sink: a token, the lease it was
// issued for, and the owner of that acquisition.
//
// Tokens are comparable only with tokens of the same lease: each lease name
// has its own strictly increasing sequence, and two leases' sequences say
// nothing about each other. So a sink keeps its fence per (resource, Scope),
// and a token is only ever compared with tokens of the same Scope: two
// leases writing one resource never refuse each other, while a stale holder
// of one lease is still refused.
type Holder struct {
	// Scope is the name of the lease the token was issued for (package
	// lease sets it to the lease name). "" is a scope of its own, not a
	// wildcard. Writers that must be fenced against each other across
	// leases say so explicitly by presenting one shared Scope; their tokens
	// must then come from one sequence.
	Scope string
	// Token is the fencing token; None (0) is never accepted.
	Token Token
	// Owner is the owner of the acquisition that got Token (the lease's
	// random owner value). The rule accepts an equal token only from the
	// same owner.
	Owner string
}

// String formats h for people: its scope, token and owner id (OwnerID),
// never its owner, a write capability (docs/security.md).
//
// Every fmt verb prints this masked form (Format): a Holder, a *Holder,
// and a value that holds one in an exported field, a slice or a map. fmt
// cannot call a method of a value in an unexported struct field: it
// prints a Holder there (directly, or in a slice, array or map there) by
// reflection, field by field, owner included, and no type can prevent
// that (a *Holder there prints as an address). So do not format a
// struct that keeps a Holder in an unexported field, or give that struct
// a String or Format method of its own.
func (h Holder) String() string {
	return fmt.Sprintf("{Scope:%q Token:%d OwnerID:%s}", h.Scope, h.Token, OwnerID(h.Owner))
}

// GoString is String, for fmt's %#v.
func (h Holder) GoString() string { return "fence.Holder" + h.String() }

// Format implements fmt.Formatter, so that no verb prints the owner (%d
// and %x of a struct print its fields one by one): %#v prints GoString,
// %q String quoted, every other verb String, each
// with the width, precision and flags it would apply to a string.
func (h Holder) Format(f fmt.State, verb rune) {
	ownerarg.FormatMasked(f, verb, h.String(), h.GoString())
}

// LogValue implements slog.LogValuer: the scope, token and owner_id,
// never the owner.
func (h Holder) LogValue() slog.Value {
	return slog.GroupValue(slog.String("scope", h.Scope), slog.Uint64("token", uint64(h.Token)), slog.String("owner_id", OwnerID(h.Owner)))
}

// MarshalJSON encodes h as {"Scope":…,"Token":…,"OwnerID":…}
// (encoding/json), its owner id and never its owner, as fmt and slog print
// it: a struct dumped as JSON (a debug endpoint, a config echo) does not
// carry the write capability. The JSON does not decode back into a
// Holder: hand a sink the owner itself (httpfence's Transport sends it
// in a header). A struct that embeds a Holder marshals as the Holder alone
// (encoding/json calls the promoted method): name the field instead.
func (h Holder) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Scope   string
		Token   Token
		OwnerID string
	}{h.Scope, h.Token, OwnerID(h.Owner)})
}

// Check applies the acceptance rule (see Check) to h for resource, whose
// fence for h.Scope holds current and currentOwner. It returns nil when
// accepted, an error matching ErrNoToken for None, and a *StaleTokenError
// carrying h.Scope otherwise.
func (h Holder) Check(resource string, current Token, currentOwner string) error {
	err := Check(resource, current, currentOwner, h.Token, h.Owner)
	if stale, ok := err.(*StaleTokenError); ok {
		stale.Scope = h.Scope
	}
	return err
}
