package redislease

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/formatver"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

var _ leasedriver.Inspector = (*Backend)(nil)

// scanCount is the COUNT hint of List's SCAN calls: keys examined per call.
const scanCount = 1000

// checkFormatRead is CheckFormat for the views (Inspect, List): it writes
// no marker where none is, so an operator's read under a wrong prefix
// (another store's) cannot leave a lease marker there for that store to
// refuse.
func (b *Backend) checkFormatRead(ctx context.Context) error {
	if b.format.Passed() {
		return nil
	}
	return formatver.RedisRead(ctx, b.rdb, store, b.prefix)
}

// Inspect implements Inspector: the lease key (owner, PTTL), the fence
// counter, the waiting flag and the holder label of name, read by one read-only script
// (scripts/inspect.lua) in one round trip. The keys share the name's hash
// tag, so this works on a Cluster too. Keys under the prefix that are not
// a lease's (another store's prefix) give ErrInvalidOptions.
func (b *Backend) Inspect(ctx context.Context, name string) (leasedriver.Info, error) {
	if err := leasedriver.CheckContext(ctx); err != nil {
		return leasedriver.Info{}, err
	}
	k, err := b.Keys(name)
	if err != nil {
		return leasedriver.Info{}, err
	}
	if err := b.checkFormatRead(ctx); err != nil {
		return leasedriver.Info{}, err
	}
	cmd := inspectScript.Run(ctx, b.rdb, []string{k.Lease, k.Fence, k.Waiting, k.Holder})
	return b.parseInspect(name, cmd)
}

// List implements Inspector. It SCANs the keyspace (every master on a
// Cluster, every shard on a Ring) for the lease keys (Prefix + "{" + name + "}") and fence keys
// (that + ":fence") whose name matches match, so a name is listed while
// held and, once released or expired, as long as its fence counter
// remains. It keeps the limit smallest names, sorted, and inspects them in
// one pipeline. match is applied by the server's SCAN MATCH inside the
// hash tag ("" is "*"); a match holding '{' or '}' returns
// ErrInvalidOptions. The prefix is matched literally: its glob characters
// (* ? [ ] \) are escaped. The SCAN guarantees apply: a key present for the
// whole scan is found, one created or deleted during it may or may not be.
func (b *Backend) List(ctx context.Context, match string, limit int) ([]leasedriver.Info, error) {
	if err := leasedriver.CheckContext(ctx); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: List limit %d, at least 1", leasedriver.ErrInvalidOptions, limit)
	}
	if match == "" {
		match = "*"
	}
	if strings.ContainsAny(match, "{}") {
		return nil, fmt.Errorf("%w: List match %q must not hold '{' or '}'", leasedriver.ErrInvalidOptions, match)
	}
	if err := b.checkFormatRead(ctx); err != nil {
		return nil, err
	}
	names, err := b.scanNames(ctx, globEscape(b.prefix)+"{"+match+"}*", limit)
	if err != nil {
		return nil, err
	}
	return b.inspectAll(ctx, names)
}

// globEscape escapes the glob characters of s (* ? [ ] and the backslash)
// with a backslash, so that SCAN MATCH matches s literally.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(s)
}

// scanNames returns the sorted, distinct lease names of the keys matching
// pattern that are a lease key or a fence key, at most limit (the
// smallest).
func (b *Backend) scanNames(ctx context.Context, pattern string, limit int) ([]string, error) {
	set := nameSet{limit: limit, names: map[string]struct{}{}}
	scan := func(ctx context.Context, node redis.Cmdable) error {
		iter := node.Scan(ctx, 0, pattern, scanCount).Iterator()
		for iter.Next(ctx) {
			if name, ok := b.nameOf(iter.Val()); ok {
				set.add(name)
			}
		}
		return iter.Err()
	}
	var err error
	switch c := b.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
	default:
		err = scan(ctx, b.rdb)
	}
	if err != nil {
		return nil, fmt.Errorf("lease: list: %w", err)
	}
	return set.sorted(), nil
}

// nameOf returns the lease name of key when key is exactly a lease key or
// a fence key of this backend's layout.
func (b *Backend) nameOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, b.prefix+"{")
	if !ok {
		return "", false
	}
	name, suffix, ok := strings.Cut(rest, "}")
	if !ok || (suffix != "" && suffix != ":fence") || leasedriver.CheckName(name) != nil {
		return "", false
	}
	return name, true
}

// inspectAll runs Inspect's script for every name in one pipeline (routed
// per slot on a Cluster).
func (b *Backend) inspectAll(ctx context.Context, names []string) ([]leasedriver.Info, error) {
	if len(names) == 0 {
		return []leasedriver.Info{}, nil
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(names))
	for i, name := range names {
		k, _ := b.Keys(name) // names come from nameOf, valid
		cmds[i] = inspectScript.Queue(ctx, pipe, inspectScript.Prepared([]string{k.Lease, k.Fence, k.Waiting, k.Holder}))
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	infos := make([]leasedriver.Info, len(names))
	replies := inspectScript.Replies()
	for i, cmd := range cmds {
		info, err := b.parseInspect(names[i], replies.Fallback(ctx, b.rdb, cmd))
		if err != nil {
			return nil, err
		}
		infos[i] = info
	}
	return infos, nil
}

// parseInspect reads inspect.lua's reply {owner, pttl, token, waiting,
// holder}, keeping only the owner's fence.OwnerID. A
// WRONGTYPE answer means the keys under the prefix are not a lease's (the
// prefix of another store, such as the scheduler's ledger): reported as
// ErrInvalidOptions, naming the prefix.
func (b *Backend) parseInspect(name string, cmd *redis.Cmd) (leasedriver.Info, error) {
	vals, err := cmd.Slice()
	if err != nil && strings.Contains(err.Error(), "WRONGTYPE") { // a script's error may wrap it
		return leasedriver.Info{}, fmt.Errorf("%w: inspect %q: the keys under prefix %q are not leases (is it another store's prefix, such as the scheduler ledger's?): %w",
			leasedriver.ErrInvalidOptions, name, b.prefix, err)
	}
	if err != nil {
		return leasedriver.Info{}, fmt.Errorf("lease: inspect %q: %w", name, err)
	}
	if len(vals) != 5 {
		return leasedriver.Info{}, fmt.Errorf("lease: inspect %q: reply of %d values, want 5", name, len(vals))
	}
	owner, _ := vals[0].(string)
	pttl, _ := vals[1].(int64)
	tokenText, _ := vals[2].(string)
	waiting, _ := vals[3].(int64)
	holder, _ := vals[4].(string)
	token, err := fence.ParseToken(tokenText)
	if err != nil {
		return leasedriver.Info{}, fmt.Errorf("lease: inspect %q: fence counter: %w", name, err)
	}
	info := leasedriver.Info{Name: name, Token: token, Waiting: waiting == 1}
	if owner != "" {
		info.Held, info.OwnerID, info.Holder = true, fence.OwnerID(owner), labelOf(holder, tokenText)
		info.TTL = time.Duration(max(pttl, 0)) * time.Millisecond
	}
	return info, nil
}

// labelOf is the holder label in a holder key's value, "<token> <label>"
// (internal/leaselua's holdfast_lease_label), when token is the fence
// counter's, the current holder's; "" for an earlier holder's (an
// acquisition without a label writes none, so the key may hold one) or a
// value of another form.
func labelOf(v, token string) string {
	if label, ok := strings.CutPrefix(v, token+" "); ok {
		return label
	}
	return ""
}

// nameSet keeps the limit smallest distinct names added, safe for the
// concurrent scans of a Cluster's masters.
type nameSet struct {
	mu    sync.Mutex
	limit int
	names map[string]struct{}
	max   string // the largest name kept, when len(names) == limit
}

func (s *nameSet) add(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.names[name]; ok {
		return
	}
	if len(s.names) == s.limit {
		if name > s.max {
			return
		}
		delete(s.names, s.max)
	}
	s.names[name] = struct{}{}
	if len(s.names) == s.limit {
		s.max = ""
		for n := range s.names {
			s.max = max(s.max, n)
		}
	}
}

func (s *nameSet) sorted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.names))
	for n := range s.names {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
