package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// pgStore is the real sink: settlement rows in PostgreSQL, each written in
// a transaction that first checks and raises the guard (sinks/pgfence).
// A refused write rolls back; the refusal is then recorded in a table of
// its own, so the figures come from the database.
type pgStore struct {
	pool     *pgxpool.Pool
	guard    *pgfence.Guard
	schema   string
	unfenced bool
}

func openPG(ctx context.Context, url, schema string, unfenced bool) (*pgStore, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	guard, err := pgfence.New(pgfence.Options{Schema: schema})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &pgStore{pool: pool, guard: guard, schema: schema, unfenced: unfenced}, nil
}

// migrate creates the guard table and the demo's two tables.
func (p *pgStore) migrate(ctx context.Context) error {
	if err := p.guard.Migrate(ctx, p.pool); err != nil {
		return err
	}
	_, err := p.pool.Exec(ctx, fmt.Sprintf(`
		CREATE TABLE IF NOT EXISTS %[1]s.settlements (
			id bigserial PRIMARY KEY, slot timestamptz NOT NULL, replica text NOT NULL,
			token bigint NOT NULL, written_at timestamptz NOT NULL DEFAULT now());
		CREATE TABLE IF NOT EXISTS %[1]s.settlement_rejections (
			id bigserial PRIMARY KEY, slot timestamptz NOT NULL, replica text NOT NULL,
			token bigint NOT NULL, current_token bigint NOT NULL,
			rejected_at timestamptz NOT NULL DEFAULT now());`, pgx.Identifier{p.schema}.Sanitize()))
	return err
}

func (p *pgStore) dropSchema(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{p.schema}.Sanitize()+" CASCADE")
	return err
}

func (p *pgStore) Write(ctx context.Context, slot time.Time, replica string, h fence.Holder) error {
	token := h.Token
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if !p.unfenced {
			if err := p.guard.Check(ctx, tx, resource, h); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+p.table("settlements")+" (slot, replica, token) VALUES ($1, $2, $3)",
			slot, replica, int64(token))
		return err
	})
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		if _, rerr := p.pool.Exec(ctx, "INSERT INTO "+p.table("settlement_rejections")+
			" (slot, replica, token, current_token) VALUES ($1, $2, $3, $4)",
			slot, replica, int64(token), int64(stale.Current)); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	return err
}

func (p *pgStore) Report(ctx context.Context) (report, error) {
	var rep report
	rows, err := p.pool.Query(ctx, "SELECT slot, replica, token FROM "+p.table("settlements")+" ORDER BY id")
	if err != nil {
		return rep, err
	}
	for rows.Next() {
		var r row
		var tok int64
		if err := rows.Scan(&r.Slot, &r.Replica, &tok); err != nil {
			return rep, err
		}
		r.Token = fence.Token(tok)
		rep.Rows = append(rep.Rows, r)
	}
	if err := rows.Err(); err != nil {
		return rep, err
	}
	rows, err = p.pool.Query(ctx, "SELECT slot, replica, token, current_token FROM "+p.table("settlement_rejections")+" ORDER BY id")
	if err != nil {
		return rep, err
	}
	for rows.Next() {
		var r row
		var tok, cur int64
		if err := rows.Scan(&r.Slot, &r.Replica, &tok, &cur); err != nil {
			return rep, err
		}
		r.Token, r.Current = fence.Token(tok), fence.Token(cur)
		rep.Rejections = append(rep.Rejections, r)
	}
	return rep, rows.Err()
}

func (p *pgStore) MaxToken(ctx context.Context) (fence.Token, error) {
	var tok int64
	err := p.pool.QueryRow(ctx, "SELECT coalesce(max(token), 0) FROM "+p.table("settlements")).Scan(&tok)
	return fence.Token(tok), err
}

func (p *pgStore) Close() { p.pool.Close() }

func (p *pgStore) table(name string) string { return pgx.Identifier{p.schema, name}.Sanitize() }
