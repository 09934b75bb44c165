package pgtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/tracelog"

	"github.com/holdfast-go/holdfast/internal/leaktest"
)

// Args is what pgx's tracelog logs of every statement a pool runs (its
// SQL and arguments, which tracelog hands to the logger as they are but
// for long strings and byte slices), printed three ways as loggers print
// it: fmt (%v), encoding/json, and slog's JSON handler. Tests use it to
// show that a secret (a lease owner) never shows in a query log
// (Showing). Count is the logged entries that carried arguments.
type Args struct {
	leaktest.Text
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
	_, args := data["args"]
	a.Add(args, fmt.Sprintf("%s %v\n%s\n%s", msg, data, js, bytes.TrimSuffix(sl.Bytes(), []byte("\n"))))
}
