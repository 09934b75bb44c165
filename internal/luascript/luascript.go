package luascript

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"

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

// Script is one Lua script. It is immutable and safe for concurrent use.
type Script struct {
	src  string
	hash string
	sha  any // hash, boxed once
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
// arguments with EVAL on rdb and returns that command. A NOSCRIPT reply
// means the script did not run, so running it now runs it once.
func (s *Script) Fallback(ctx context.Context, rdb Processor, cmd *redis.Cmd) *redis.Cmd {
	if !IsNoScript(cmd.Err()) {
		return cmd
	}
	prepared := cmd.Args()
	eval := make([]any, len(prepared))
	eval[0], eval[1] = "eval", s.src
	copy(eval[2:], prepared[2:])
	cmd = s.Cmd(ctx, eval)
	_ = rdb.Process(ctx, cmd)
	return cmd
}

// IsNoScript reports err a server's NOSCRIPT reply: the server does not
// know the script's SHA-1.
func IsNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || strings.HasPrefix(err.Error(), "NOSCRIPT"))
}
