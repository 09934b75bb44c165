package quorum

import (
	"fmt"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/lease/redislease"
)

// Defaults for Options.
const (
	// DefaultRenewParallelism is how many leases of one renewal batch are
	// extended at once.
	DefaultRenewParallelism = 16
	// DefaultSplitRetries is how many more times one Acquire tries after a
	// try that failed without another owner seen on a majority (a split
	// vote, or masters too slow to tell).
	DefaultSplitRetries = 5
	// DefaultSettleWait is Options.SettleWait's default (100 ms).
	DefaultSettleWait = 100 * time.Millisecond
	// DefaultSplitDelay bounds the random wait before the first such
	// retry (5 ms); each later retry doubles the bound.
	DefaultSplitDelay = 5 * time.Millisecond
	// DefaultTokenLead is how far ahead of its clock an acquirer proposes
	// its token (10 ms).
	DefaultTokenLead = 10 * time.Millisecond
)

// Options configure a Backend. The zero value is valid: every field has a
// default.
type Options struct {
	// Prefix starts every key, on every master. Default
	// redislease.DefaultPrefix, so a lease called name lives in the same keys
	// as with the single-Redis backend: <prefix>{name} and
	// <prefix>{name}:fence. It must not hold '{' or '}'.
	Prefix string
	// RenewParallelism is how many leases of one renewal batch are
	// extended at once (each extension is one round trip to every master,
	// in parallel). Default DefaultRenewParallelism (16).
	RenewParallelism int
	// SplitRetries is how many more redsync tries one Acquire makes after
	// a try that failed although no other owner was seen on a majority of
	// the masters: a split vote (several acquirers raced and each took a
	// minority), or masters that did not answer within StragglerWait and
	// may hide a majority holder or not. A retry is made only once the
	// failed try is over on every master (within SettleWait) and no other
	// owner holds a majority of their replies. Retry n (from 1) first waits a
	// random time in [0, SplitDelay << (n-1)), so that racers spread out
	// more on each round: with the defaults, at most 155 ms in all. A try
	// refused by one owner's majority is not retried. Default
	// DefaultSplitRetries (5); -1 disables.
	SplitRetries int
	// SettleWait is the least time a failed try that may be retried
	// (SplitRetries) waits for every master to be over with it: a master
	// that hangs longer costs the retry, not every failed try its
	// client's timeout. The wait is 10 times the time redsync took to
	// decide the try when that is longer (a loaded host answers slowly
	// everywhere), and never past the end of the acquisition's trust
	// window. Default DefaultSettleWait (100 ms).
	SettleWait time.Duration
	// SplitDelay bounds the random wait before the first retry of
	// SplitRetries; each later retry doubles it. Default
	// DefaultSplitDelay (5 ms).
	SplitDelay time.Duration
	// TokenLead is how far ahead of this process's clock (in µs since the
	// Unix epoch) Acquire proposes the token to every master. A master's
	// candidate is max(INCR(counter), its TIME in µs rounded up to 10 ms,
	// the proposal): when
	// the proposal is above both on every master of the majority, they all
	// answer it, their counters are at the token already, and the raise
	// round trip is left out. When it is not (a clock behind the masters'
	// by more than the lead, or racing acquirers), the candidates differ
	// and the raise runs. Tokens run ahead of the masters' clocks by up
	// to the lead. While every master keeps its counter, the lead costs
	// speed, never safety. When a master loses its counter (restart
	// without persistence), the proposal is what keeps tokens increasing,
	// so every holder of a lease must use the same lead: an acquisition
	// with a lower lead (or -1) that follows one with a higher lead
	// within their difference may get a smaller token. Lower it only
	// after stopping every holder on the old lead and waiting the
	// difference; raise it only with every holder at once, or accept the
	// same risk during the change (docs/quorum.md, assumption 3). Keep it
	// below what a master restart takes. Default DefaultTokenLead
	// (10 ms); -1 disables proposals; at most an hour.
	TokenLead time.Duration
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = redislease.DefaultPrefix
	}
	if o.RenewParallelism == 0 {
		o.RenewParallelism = DefaultRenewParallelism
	}
	switch o.SplitRetries {
	case 0:
		o.SplitRetries = DefaultSplitRetries
	case -1:
		o.SplitRetries = 0
	}
	if o.SplitDelay == 0 {
		o.SplitDelay = DefaultSplitDelay
	}
	if o.SettleWait == 0 {
		o.SettleWait = DefaultSettleWait
	}
	if o.TokenLead == 0 {
		o.TokenLead = DefaultTokenLead
	}
	return o
}

func (o Options) validate() error {
	switch {
	case strings.ContainsAny(o.Prefix, "{}"):
		return fmt.Errorf("%w: Prefix %q must not hold '{' or '}'", ErrInvalidOptions, o.Prefix)
	case o.RenewParallelism < 0:
		return fmt.Errorf("%w: RenewParallelism %d is negative", ErrInvalidOptions, o.RenewParallelism)
	case o.SplitRetries < 0:
		return fmt.Errorf("%w: SplitRetries %d: want -1 (disabled) or more", ErrInvalidOptions, o.SplitRetries)
	case o.SplitDelay < 0:
		return fmt.Errorf("%w: SplitDelay %v is negative", ErrInvalidOptions, o.SplitDelay)
	case o.SettleWait < 0:
		return fmt.Errorf("%w: SettleWait %v is negative", ErrInvalidOptions, o.SettleWait)
	case o.TokenLead < -1 || o.TokenLead > time.Hour:
		return fmt.Errorf("%w: TokenLead %v: want -1 (disabled) or up to an hour", ErrInvalidOptions, o.TokenLead)
	}
	return nil
}
