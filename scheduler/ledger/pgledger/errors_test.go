package pgledger

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

func TestWrapDBError(t *testing.T) {
	for code, retryable := range map[string]bool{"40001": true, "40P01": true, "23505": false, "57014": false} {
		err := wrapDBError("begin", "settle", &pgconn.PgError{Code: code})
		require.Equal(t, retryable, errors.Is(err, ErrRetryable), code)
		require.Equal(t, retryable, pgfence.IsRetryable(err), code)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), code)
		require.Equal(t, code, pgErr.Code)
	}
	err := wrapDBError("begin", "settle", context.Canceled)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, ErrRetryable)
}

func TestCleanText(t *testing.T) {
	for _, s := range []string{"", "plain", "nul\x00inside", "bad\xffutf8", strings.Repeat("é", MaxTextLen), strings.Repeat("x", MaxTextLen+1)} {
		got := cleanText(s)
		require.True(t, validText(got), "%q", got)
		require.True(t, utf8.ValidString(got))
		require.LessOrEqual(t, len(got), MaxTextLen)
		if validText(s) && len(s) <= MaxTextLen {
			require.Equal(t, s, got)
		}
	}
}
