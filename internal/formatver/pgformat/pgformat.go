// Package pgformat is the part of internal/formatver that needs pgx: the
// Postgres stores' check on first use and the error of their migrations'
// check. Apart so that importers of the Redis stores do not pull pgx.
package pgformat

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/formatver"
)

// Queryer is a pool, a connection or a transaction.
type Queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Postgres runs formatver.CommentSQL for table on q and CheckComment.
func Postgres(ctx context.Context, q Queryer, store, table string) error {
	var found *string
	if err := q.QueryRow(ctx, formatver.CommentSQL, table).Scan(&found); err != nil {
		return fmt.Errorf("%s: check the stored format of %s: %w", store, table, err)
	}
	return formatver.CheckComment(store, table, found)
}

// FromMigrate turns the exception of that check into a
// *fence.FormatError; other errors come back as they are.
func FromMigrate(err error, store, table string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == formatver.SQLState {
		return &fence.FormatError{Store: store, Where: "the comment of table " + table, Found: pgErr.Detail, Want: formatver.Marker(store)}
	}
	return err
}
