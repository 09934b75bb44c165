package logattr

import (
	"log/slog"
	"time"
)

// Duration returns the attribute key = d.String() ("5s", "250ms", "0s").
// Use it for every time.Duration logged, in place of slog.Duration.
func Duration(key string, d time.Duration) slog.Attr {
	return slog.String(key, d.String())
}
