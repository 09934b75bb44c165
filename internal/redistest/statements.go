package redistest

import (
	"context"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/extra/rediscmd/v9"
	"github.com/redis/go-redis/v9"
)

// Statements is the text of every command sent through a client, as the
// hooks users install on their clients record it: redisotel's tracing
// hook (a span's db.statement is extra/rediscmd's CmdString of the
// command, with its error, or CmdsString of a pipeline) and a logging
// hook printing cmd.String() before the command is sent. Tests use it to
// show that a secret (a lease owner) never shows in them. Replies are not
// recorded (redisotel records none): a reply carries what the command
// read, and the ledger stores each attempt's owner (its fence), which
// anyone who may read the keys may read.
type Statements struct {
	mu sync.Mutex
	b  strings.Builder
	n  int
}

// RecordStatements adds a hook to rdb that records into the returned
// Statements the text of every command and pipeline rdb sends, with its
// error, once it ran.
func RecordStatements(rdb redis.UniversalClient) *Statements {
	s := new(Statements)
	rdb.AddHook(s)
	return s
}

// String returns everything recorded, one command per line.
func (s *Statements) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Showing returns the first recorded line that holds one of secrets, ""
// when none does (an empty secret is skipped).
func (s *Statements) Showing(secrets ...string) string {
	for line := range strings.Lines(s.String()) {
		for _, secret := range secrets {
			if secret != "" && strings.Contains(line, secret) {
				return line
			}
		}
	}
	return ""
}

// Len returns how many commands were recorded (a pipeline's count each).
func (s *Statements) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// sending records cmd.String() of commands about to be sent (their
// arguments: no reply yet).
func (s *Statements) sending(cmds ...redis.Cmder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cmd := range cmds {
		s.b.WriteString(cmd.String())
		s.b.WriteByte('\n')
	}
}

// sent records rediscmd's text of commands that ran (arguments and error).
func (s *Statements) sent(cmds ...redis.Cmder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cmd := range cmds {
		s.n++
		s.b.WriteString(rediscmd.CmdString(cmd))
		s.b.WriteByte('\n')
	}
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
		s.sending(cmd)
		err := next(ctx, cmd)
		s.sent(cmd)
		return err
	}
}

// ProcessPipelineHook implements redis.Hook.
func (s *Statements) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.sending(cmds...)
		err := next(ctx, cmds)
		_, text := rediscmd.CmdsString(cmds)
		s.mu.Lock()
		s.b.WriteString(text)
		s.b.WriteByte('\n')
		s.mu.Unlock()
		s.sent(cmds...)
		return err
	}
}
