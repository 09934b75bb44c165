package sim

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// slotID names a slot: job, partition and instant in unix seconds.
type slotID struct {
	job, partition string
	at             int64
}

func (s slotID) String() string {
	return fmt.Sprintf("%s/%s@%s", s.job, s.partition, time.Unix(s.at, 0).UTC().Format("15:04:05"))
}

func slotOf(sl ledger.Slot) slotID {
	return slotID{sl.Job, sl.Partition, sl.At.Unix()}
}

// Violation is one broken invariant.
type Violation struct {
	Step      int    // the driver's step when it was found
	Invariant string // a short name: stale_effect, effect_twice, ...
	Detail    string
}

func (v Violation) String() string {
	return fmt.Sprintf("step %d: %s: %s", v.Step, v.Invariant, v.Detail)
}

// fenceMark is the highest (token, owner) a sink accepted on a resource.
type fenceMark struct {
	token fence.Token
	owner string
}

// belief is a replica's belief that it holds a lease (from its lease
// client's Observer), with the owner the store gave it.
type belief struct {
	owner      string
	notHeldAt  time.Time // when the checker first saw the store not holding it (zero: holds)
	acquiredAt time.Time
}

// checker holds the model the invariants are checked against. The
// stores and sinks tell it of every effect, grant and ledger write as
// they happen (under their own locks); the driver calls step at every
// simulated step for the checks that look at the whole state.
type checker struct {
	mu         sync.Mutex
	step       int
	violations []Violation

	marks    map[string]fenceMark     // per sink resource
	effects  map[slotID]int           // applied effects per slot
	tokens   map[string]fence.Token   // the latest token the lease store issued, per name
	status   map[slotID]ledger.Status // the latest status written, per slot (cleared by a ledger loss)
	recorded map[slotID]bool          // slots the ledger recorded with a reason (kept across a loss)
	beliefs  map[int]map[string]*belief

	settled int
	prunedN int64        // records the operator pruned (op_prune)
	refused int          // stale writes the sink refused
	debug   func(string) // when set, told of every ledger write (tests)
}

func newChecker() *checker {
	return &checker{marks: map[string]fenceMark{}, effects: map[slotID]int{}, tokens: map[string]fence.Token{},
		status: map[slotID]ledger.Status{}, recorded: map[slotID]bool{},
		beliefs: map[int]map[string]*belief{}}
}

// fail records a violation. c.mu is held.
func (c *checker) fail(inv, format string, args ...any) {
	if len(c.violations) < 100 {
		c.violations = append(c.violations, Violation{Step: c.step, Invariant: inv, Detail: fmt.Sprintf(format, args...)})
	}
}

// accepted: the sink accepted a write with token and owner on resource.
// No stale effect: the token must pass fence.Accept against the highest
// one the sink accepted on resource before.
func (c *checker) accepted(resource string, token fence.Token, owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.marks[resource]
	if !fence.Accept(m.token, m.owner, token, owner) {
		c.fail("stale_effect", "%s accepted token %d after token %d", resource, token, m.token)
	}
	if token > m.token || (token == m.token && owner == m.owner) {
		c.marks[resource] = fenceMark{token, owner}
	}
}

// effect: the sink applied slot's effect (a write it accepted whose
// idempotency key was new). No slot's effect twice.
func (c *checker) effect(slot slotID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.effects[slot]++
	if c.effects[slot] > 1 {
		c.fail("effect_twice", "%s has %d effects", slot, c.effects[slot])
	}
}

// granted: the lease store issued token for name. Tokens per scope
// strictly increase.
func (c *checker) granted(name string, token fence.Token) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev := c.tokens[name]; token <= prev {
		c.fail("token_not_increasing", "lease %s issued token %d after %d", name, token, prev)
	}
	c.tokens[name] = token
}

// legal lists the ledger transitions a record may make without an
// operator's request; a request (Retry, Backfill, Trigger) makes any
// record pending (the ledger refuses it for a running one).
var legal = map[ledger.Status][]ledger.Status{
	"":                     {ledger.StatusPending, ledger.StatusRunning, ledger.StatusSkipped, ledger.StatusMissed},
	ledger.StatusPending:   {ledger.StatusRunning, ledger.StatusSkipped, ledger.StatusMissed, ledger.StatusPending},
	ledger.StatusRunning:   {ledger.StatusRunning, ledger.StatusSucceeded, ledger.StatusFailed, ledger.StatusAbandoned},
	ledger.StatusFailed:    {ledger.StatusRunning, ledger.StatusFailed, ledger.StatusAbandoned, ledger.StatusPending},
	ledger.StatusAbandoned: {ledger.StatusRunning, ledger.StatusFailed, ledger.StatusAbandoned, ledger.StatusPending},
	ledger.StatusSucceeded: {ledger.StatusSucceeded},
	ledger.StatusSkipped:   {ledger.StatusSkipped},
	ledger.StatusMissed:    {ledger.StatusMissed, ledger.StatusPending},
}

// ledgerWrote: op wrote rec. Every transition is legal; a slot that
// succeeded never begins again (succeeded -> running is not legal).
func (c *checker) ledgerWrote(op string, rec ledger.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := slotOf(rec.Slot)
	prev := c.status[id]
	ok := op == "request" && rec.Status == ledger.StatusPending
	for _, s := range legal[prev] {
		ok = ok || s == rec.Status
	}
	if !ok {
		c.fail("illegal_transition", "%s: %s -> %s by %s", id, orNone(prev), rec.Status, op)
	}
	c.status[id] = rec.Status
	if c.debug != nil {
		a, _ := rec.Latest()
		c.debug(fmt.Sprintf("step %d ledger %s %s -> %s holder=%s err=%q", c.step, op, id, rec.Status, a.Holder, a.Error))
	}
	switch rec.Status {
	case ledger.StatusSucceeded:
		c.recorded[id] = true
	case ledger.StatusSkipped, ledger.StatusMissed:
		c.recorded[id] = true
	case ledger.StatusFailed, ledger.StatusAbandoned:
		if a, ok := rec.Latest(); ok && (a.Error != "" || a.Class != "") {
			c.recorded[id] = true
		}
	}
}

func orNone(s ledger.Status) string {
	if s == "" {
		return "none"
	}
	return string(s)
}

// pruned: the operator pruned n records of slots the checker has judged
// already (older than a minute; Grace is 45 s). Their statuses stay
// remembered, as across a data loss.
func (c *checker) pruned(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prunedN += n
}

// ledgerLost: the ledger restarted without its data.
func (c *checker) ledgerLost() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status = map[slotID]ledger.Status{}
}

// acquired and lost track replica r's beliefs (lease.Observer).
func (c *checker) acquired(r int, name, owner string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.beliefs[r] == nil {
		c.beliefs[r] = map[string]*belief{}
	}
	c.beliefs[r][name] = &belief{owner: owner, acquiredAt: now}
}

func (c *checker) lost(r int, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.beliefs[r], name)
}

// forget drops replica r's beliefs (it crashed).
func (c *checker) forget(r int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.beliefs, r)
}

// checkBeliefs: a holder is told of a lost lease within its trust window:
// a lease the store no longer holds for it is believed held no longer
// than ttl (plus one step) after the checker first saw it gone.
func (c *checker) checkBeliefs(store *leaseStore, now time.Time, ttl, step time.Duration) {
	// The store is asked without c.mu held: the store tells the checker
	// of grants under its own lock.
	type key struct {
		r     int
		name  string
		owner string
	}
	c.mu.Lock()
	var keys []key
	for _, r := range sortedKeys(c.beliefs) {
		for _, name := range sortedKeys(c.beliefs[r]) {
			keys = append(keys, key{r, name, c.beliefs[r][name].owner})
		}
	}
	c.mu.Unlock()
	held := make([]bool, len(keys))
	for i, k := range keys {
		held[i] = store.holds(k.name, k.owner)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range keys {
		b := c.beliefs[k.r][k.name]
		if b == nil || b.owner != k.owner {
			continue // lost or acquired again meanwhile
		}
		if held[i] {
			b.notHeldAt = time.Time{}
			continue
		}
		if b.notHeldAt.IsZero() {
			b.notHeldAt = now
			continue
		}
		if gone := now.Sub(b.notHeldAt); gone > ttl+step {
			c.fail("loss_not_signalled", "replica incarnation %d still holds %s %v after the store lost it", k.r, k.name, gone)
			b.notHeldAt = now // once per trust window
		}
	}
}

// checkDue: every slot of units due at or before upTo, after from, has
// an effect or a ledger record with a reason, unless exempt says the
// operator paused its job then.
func (c *checker) checkDue(units []slotID, from, upTo int64, exempt func(job string, at int64) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for at := from + 1; at <= upTo; at++ {
		for _, u := range units {
			id := slotID{u.job, u.partition, at}
			if exempt(u.job, at) {
				continue
			}
			n++
			if c.effects[id] == 0 && !c.recorded[id] {
				c.fail("slot_unaccounted", "%s has neither an effect nor a ledger record with a reason (ledger status %s)", id, orNone(c.status[id]))
			}
		}
	}
	c.settled += n
	return n
}

func sortedKeys[K int | string, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// refusedWrite: the sink refused a stale write.
func (c *checker) refusedWrite() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refused++
}
