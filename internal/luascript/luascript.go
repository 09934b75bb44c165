package luascript

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// EvalSha is the EVALSHA command name, the first element of a prepared
// command (see Script.Prepared).
const EvalSha = "evalsha"

// Processor runs a command: a redis.UniversalClient, a redis.Pipeliner or
// an *autopipe.Pipe.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Script is one Lua script. Its text is immutable; it is safe for
// concurrent use.
type Script struct {
	src  string
	hash string
	sha  any // hash, boxed once

	// flights holds, per Processor, a channel closed when the EVAL in
	// flight on it returns (see Fallback).
	mu      sync.Mutex
	flights map[any]chan struct{}
}

// New returns the script whose text is parts concatenated in order: shared
// preludes (which define functions only, such as fencerule.Lua) first, then
// the script's own text. A part that does not end in a newline gets one, so
// that a part's last line never runs into the next part's first.
func New(parts ...string) *Script {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p)
		if !strings.HasSuffix(p, "\n") {
			b.WriteByte('\n')
		}
	}
	src := b.String()
	sum := sha1.Sum([]byte(src))
	hash := hex.EncodeToString(sum[:])
	return &Script{src: src, hash: hash, sha: hash}
}

// Source returns the script's full text, the argument of EVAL and SCRIPT
// LOAD.
func (s *Script) Source() string { return s.src }

// Hash returns the script's SHA-1 in hex, the name EVALSHA runs it by.
func (s *Script) Hash() string { return s.hash }

// SHA returns Hash boxed once, the second element of a prepared command.
func (s *Script) SHA() any { return s.sha }

// Prepared returns the EVALSHA command of keys and args in the layout Cmd,
// RunPrepared and Queue take: "evalsha", sha, len(keys), keys, args.
func (s *Script) Prepared(keys []string, args ...any) []any {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, EvalSha, s.sha, len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	return append(cmd, args...)
}

// Cmd returns the command of prepared (see Prepared), not yet run. Its keys
// start at position 3, which routes it on a Cluster.
func (s *Script) Cmd(ctx context.Context, prepared []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, prepared...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// Run runs the script with keys and args on rdb: EVALSHA, then EVAL when
// the server does not know the script. Read the reply and the error from
// the returned command.
func (s *Script) Run(ctx context.Context, rdb Processor, keys []string, args ...any) *redis.Cmd {
	return s.RunPrepared(ctx, rdb, s.Prepared(keys, args...))
}

// RunPrepared is Run of a command built by the caller (see Prepared); it
// allocates only the redis.Cmd when the server knows the script.
func (s *Script) RunPrepared(ctx context.Context, rdb Processor, prepared []any) *redis.Cmd {
	cmd := s.Cmd(ctx, prepared)
	_ = rdb.Process(ctx, cmd)
	return s.Fallback(ctx, rdb, cmd)
}

// Queue queues the EVALSHA command of prepared in pipe and returns it;
// after pipe's Exec, pass it to Fallback.
func (s *Script) Queue(ctx context.Context, pipe redis.Pipeliner, prepared []any) *redis.Cmd {
	cmd := s.Cmd(ctx, prepared)
	_ = pipe.Process(ctx, cmd)
	return cmd
}

// Fallback returns cmd, an EVALSHA command of this script that has run,
// when it did not fail with NOSCRIPT; otherwise it runs the same keys and
// arguments again and returns that command. A NOSCRIPT reply means the
// script did not run, so running it now runs it once.
//
// Run again, the command goes by EVAL, which sends the script's text and
// makes the server load it, unless another call is loading it: when an
// EVAL of the script is in flight on rdb, Fallback waits for it and sends
// EVALSHA (EVAL only when that meets NOSCRIPT too). So concurrent calls that meet
// NOSCRIPT together (after a restart, a failover or SCRIPT FLUSH) cost the
// server about one load, not one each: loading a large script costs
// milliseconds (the scheduler's joined claim: about 3.5 ms, where its
// EVALSHA costs about 40 µs). The replies of one pipeline fall back with
// Replies.
func (s *Script) Fallback(ctx context.Context, rdb Processor, cmd *redis.Cmd) *redis.Cmd {
	if !IsNoScript(cmd.Err()) {
		return cmd
	}
	prepared := cmd.Args()
	server := serverOf(rdb)
	if server == nil {
		return s.eval(ctx, rdb, prepared)
	}
	if s.awaitLoad(ctx, server) {
		if again := s.evalSHA(ctx, rdb, prepared); again != nil {
			return again
		}
	}
	s.mu.Lock()
	f, busy := s.flights[server]
	if !busy {
		f = make(chan struct{})
		if s.flights == nil {
			s.flights = make(map[any]chan struct{})
		}
		s.flights[server] = f
	}
	own := !busy
	s.mu.Unlock()
	if !own {
		// Another call is loading the script: wait for it.
		select {
		case <-f:
			if again := s.evalSHA(ctx, rdb, prepared); again != nil {
				return again
			}
		case <-ctx.Done():
		}
		return s.eval(ctx, rdb, prepared)
	}
	cmd = s.eval(ctx, rdb, prepared)
	s.mu.Lock()
	delete(s.flights, server)
	s.mu.Unlock()
	close(f)
	return cmd
}

// serverOf returns what tells rdb's server(s) apart, the key of an EVAL
// in flight: rdb itself, a pointer (a go-redis client, an autopipe.Pipe);
// nil for a Processor of another kind, whose loads are not shared. Calls
// on different clients (the masters of lease/quorum) do not wait for each
// other's loads: a load on one server does not load the script on
// another.
func serverOf(rdb Processor) any {
	if rdb == nil || reflect.ValueOf(rdb).Kind() != reflect.Pointer {
		return nil
	}
	return rdb
}

// Replies falls back the replies of one pipeline of this script's EVALSHA
// commands, read in order: once one of them ran by EVAL, the server knows
// the script, and the rest go by EVALSHA again (EVAL only when that meets
// NOSCRIPT too: a Cluster pipeline spans nodes). A pipeline of n commands
// that met NOSCRIPT costs the server one load, not n.
//
//	replies := script.Replies()
//	for _, cmd := range cmds {
//		res, err := replies.Fallback(ctx, rdb, cmd).Result()
//	}
func (s *Script) Replies() *Replies { return &Replies{s: s} }

// Replies is Script.Replies; not for concurrent use.
type Replies struct {
	s      *Script
	loaded bool // an EVAL of the script was answered
}

// Fallback is Script.Fallback for the next reply of the pipeline.
func (r *Replies) Fallback(ctx context.Context, rdb Processor, cmd *redis.Cmd) *redis.Cmd {
	if !IsNoScript(cmd.Err()) {
		return cmd
	}
	if r.loaded {
		if again := r.s.evalSHA(ctx, rdb, cmd.Args()); again != nil {
			return again
		}
	}
	cmd = r.s.Fallback(ctx, rdb, cmd)
	var reply redis.Error
	if err := cmd.Err(); err == nil || errors.As(err, &reply) {
		r.loaded = true // the server answered the script: it knows it
	}
	return cmd
}

// awaitLoad waits for the EVAL in flight on server, if any, and reports
// whether it waited for one that returned.
func (s *Script) awaitLoad(ctx context.Context, server any) bool {
	s.mu.Lock()
	f := s.flights[server]
	s.mu.Unlock()
	if f == nil {
		return false
	}
	select {
	case <-f:
		return true
	case <-ctx.Done():
		return false
	}
}

// evalSHA runs prepared (an EVALSHA command's arguments) again, and
// returns the command unless it met NOSCRIPT (then nil).
func (s *Script) evalSHA(ctx context.Context, rdb Processor, prepared []any) *redis.Cmd {
	cmd := s.Cmd(ctx, prepared)
	if _ = rdb.Process(ctx, cmd); IsNoScript(cmd.Err()) {
		return nil
	}
	return cmd
}

// eval runs prepared (an EVALSHA command's arguments) with EVAL, which
// loads the script.
func (s *Script) eval(ctx context.Context, rdb Processor, prepared []any) *redis.Cmd {
	eval := make([]any, len(prepared))
	eval[0], eval[1] = "eval", s.src
	copy(eval[2:], prepared[2:])
	cmd := s.Cmd(ctx, eval)
	_ = rdb.Process(ctx, cmd)
	return cmd
}

// IsNoScript reports err a server's NOSCRIPT reply: the server does not
// know the script's SHA-1.
func IsNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || strings.HasPrefix(err.Error(), "NOSCRIPT"))
}
