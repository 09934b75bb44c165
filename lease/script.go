package lease

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
)

// Scripts run with EVALSHA and fall back to EVAL on NOSCRIPT (after a
// SCRIPT FLUSH, a restart or a failover), as redis.Script.Run does.
var (
	//go:embed scripts/acquire.lua
	acquireSrc    string
	acquireScript = newScript(acquireSrc)

	//go:embed scripts/renew.lua
	renewSrc    string
	renewScript = newScript(renewSrc)

	//go:embed scripts/release.lua
	releaseSrc    string
	releaseScript = newScript(releaseSrc)
)

// Command names, boxed once.
var (
	cmdEvalSha any = "evalsha"
	cmdEval    any = "eval"
)

// script is one Lua script of this package. Unlike redis.Script, it runs a
// command whose arguments the caller prepared in full (see redisHandle):
// redis.Script.Run builds and boxes them again on every call.
type script struct {
	src  string
	hash string
	sha  any // hash, boxed once
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	hash := hex.EncodeToString(sum[:])
	return &script{src: src, hash: hash, sha: hash}
}

// Hash returns the script's SHA-1 in hex, the name EVALSHA runs it by.
func (s *script) Hash() string { return s.hash }

// cmd returns the EVALSHA command of args: "evalsha", s.sha, the key
// count, the keys, then the arguments. The keys start at position 3, which
// routes the command on a Cluster.
func (s *script) cmd(ctx context.Context, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// processor runs a command: a redis.UniversalClient or a redis.Pipeliner.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// run runs the EVALSHA command of args (see cmd), and EVAL with the same
// keys and arguments when the server does not know the script.
func (s *script) run(ctx context.Context, rdb processor, args []any) *redis.Cmd {
	cmd := s.cmd(ctx, args)
	_ = rdb.Process(ctx, cmd)
	if !isNoScript(cmd.Err()) {
		return cmd
	}
	eval := append([]any{cmdEval, s.src}, args[2:]...)
	cmd = s.cmd(ctx, eval)
	_ = rdb.Process(ctx, cmd)
	return cmd
}
