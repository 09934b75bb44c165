package redistest

import (
	"context"
	"net"

	"github.com/redis/go-redis/extra/rediscmd/v9"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/internal/leaktest"
)

// Statements is the text of every command sent through a client, as the
// hooks users install on their clients record it: redisotel's tracing
// hook (a span's db.statement is extra/rediscmd's CmdString of the
// command, with its error, or CmdsString of a pipeline) and a logging
// hook printing cmd.String() before the command is sent. Tests use it to
// show that a secret (a lease owner) never shows in them (Showing).
// Replies are not recorded (redisotel records none): a reply carries what
// the command read, and the ledger stores each attempt's owner (its
// fence), which anyone who may read the keys may read. Count is the
// commands sent.
type Statements struct {
	leaktest.Text
}

// RecordStatements adds a hook to rdb that records into the returned
// Statements the text of every command and pipeline rdb sends, with its
// error, once it ran.
func RecordStatements(rdb redis.UniversalClient) *Statements {
	s := new(Statements)
	rdb.AddHook(s)
	return s
}

// DialHook implements redis.Hook.
func (s *Statements) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook implements redis.Hook.
func (s *Statements) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.Add(false, cmd.String()) // the arguments: no reply yet
		err := next(ctx, cmd)
		s.Add(true, rediscmd.CmdString(cmd))
		return err
	}
}

// ProcessPipelineHook implements redis.Hook.
func (s *Statements) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			s.Add(false, cmd.String())
		}
		err := next(ctx, cmds)
		_, text := rediscmd.CmdsString(cmds)
		s.Add(false, text)
		for _, cmd := range cmds {
			s.Add(true, rediscmd.CmdString(cmd))
		}
		return err
	}
}
