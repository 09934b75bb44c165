package errfamily_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/election"
	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/pglease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

// Every package's member of the family keeps its text, matches the
// family's value, and does not match another package's member.
func TestEveryPackageSentinelWrapsTheFamily(t *testing.T) {
	t.Parallel()
	members := []struct {
		err    error
		family error
		text   string
	}{
		{lease.ErrInvalidOptions, errfamily.ErrInvalidOptions, "lease: invalid options"},
		{lease.ErrNotCreated, errfamily.ErrNotCreated, "lease: client not created with New"},
		{lease.ErrNilContext, errfamily.ErrNilContext, "lease: nil context"},
		{pglease.ErrInvalidOptions, errfamily.ErrInvalidOptions, "pglease: invalid options"},
		{election.ErrInvalidOptions, errfamily.ErrInvalidOptions, "election: invalid options"},
		{election.ErrNotCreated, errfamily.ErrNotCreated, "election: not created with New"},
		{scheduler.ErrInvalidOptions, errfamily.ErrInvalidOptions, "scheduler: invalid options"},
		{scheduler.ErrNotCreated, errfamily.ErrNotCreated, "scheduler: not created with New"},
		{cron.ErrInvalidOptions, errfamily.ErrInvalidOptions, "cron: invalid options"},
		{ledger.ErrNilContext, errfamily.ErrNilContext, "ledger: nil context"},
		{pgledger.ErrInvalidOptions, errfamily.ErrInvalidOptions, "pgledger: invalid options"},
		{pgledger.ErrNotCreated, errfamily.ErrNotCreated, "pgledger: ledger not created with New"},
		{redisledger.ErrInvalidOptions, errfamily.ErrInvalidOptions, "redisledger: invalid options"},
		{schedhttp.ErrInvalidOptions, errfamily.ErrInvalidOptions, "schedhttp: invalid options"},
		{httpfence.ErrInvalidOptions, errfamily.ErrInvalidOptions, "httpfence: invalid options"},
		{idemstore.ErrNilContext, errfamily.ErrNilContext, "httpfence: nil context"},
		{pgfence.ErrInvalidOptions, errfamily.ErrInvalidOptions, "pgfence: invalid options"},
		{pgfence.ErrNotCreated, errfamily.ErrNotCreated, "pgfence: guard not created with New"},
		{redisfence.ErrInvalidOptions, errfamily.ErrInvalidOptions, "redisfence: invalid options"},
		{redisfence.ErrNotCreated, errfamily.ErrNotCreated, "redisfence: writer not created with New"},
		{redisfence.ErrNilContext, errfamily.ErrNilContext, "redisfence: nil context"},
	}
	for i, m := range members {
		require.Equal(t, m.text, m.err.Error())
		wrapped := fmt.Errorf("op: %w", m.err)
		require.ErrorIs(t, wrapped, m.err, m.text)
		require.ErrorIs(t, wrapped, m.family, m.text)
		for j, other := range members {
			if i != j {
				require.False(t, errors.Is(wrapped, other.err), "%s matches %s", m.text, other.text)
			}
		}
	}
}
