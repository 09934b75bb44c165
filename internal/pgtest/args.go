package pgtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/tracelog"
)

// Args is what pgx's tracelog logs of every statement a pool runs (its
// SQL and arguments, which tracelog hands to the logger as they are but
// for long strings and byte slices), printed three ways as loggers print
// it: fmt (%v), encoding/json, and slog's JSON handler. Tests use it to
// show that a secret (a lease owner) never shows in a query log.
type Args struct {
	mu sync.Mutex
	b  strings.Builder
	n  int
}

// RecordArgs makes cfg's connections log every statement, at the most
// verbose level, into the returned Args. Use it as OwnPool's configure.
func RecordArgs(cfg *pgxpool.Config) *Args {
	a := new(Args)
	cfg.ConnConfig.Tracer = &tracelog.TraceLog{Logger: a, LogLevel: tracelog.LogLevelTrace}
	return a
}

// Log implements tracelog.Logger.
func (a *Args) Log(_ context.Context, _ tracelog.LogLevel, msg string, data map[string]any) {
	var sl bytes.Buffer
	attrs := make([]any, 0, 2*len(data))
	for k, v := range data {
		attrs = append(attrs, k, v)
	}
	slog.New(slog.NewJSONHandler(&sl, nil)).Info(msg, attrs...)
	js, err := json.Marshal(data)
	if err != nil {
		js = []byte(err.Error())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := data["args"]; ok {
		a.n++
	}
	fmt.Fprintf(&a.b, "%s %v\n%s\n%s", msg, data, js, sl.Bytes())
}

// String returns everything logged.
func (a *Args) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.b.String()
}

// Statements returns how many logged entries carried arguments.
func (a *Args) Statements() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// Showing returns the first logged line that holds one of secrets, ""
// when none does (an empty secret is skipped).
func (a *Args) Showing(secrets ...string) string {
	for line := range strings.Lines(a.String()) {
		for _, secret := range secrets {
			if secret != "" && strings.Contains(line, secret) {
				return line
			}
		}
	}
	return ""
}
