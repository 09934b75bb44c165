package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// openRedis connects to --redis (go-redis ParseURL: redis://, rediss://,
// unix://), or with --redis-cluster to the Cluster it names
// (ParseClusterURL: redis://host:port?addr=host2:port2). The caller
// closes the client.
func (a *app) openRedis() (redis.UniversalClient, error) {
	if a.conn.redis == "" {
		return nil, usagef("this command needs Redis: --redis URL or REDIS_URL")
	}
	// One dial a command: go-redis's default of 5 dials (each retried by
	// MaxRetries) hides "connection refused" behind the --timeout.
	if misreadUserInfo(a.conn.redis) {
		what := "--redis"
		if a.conn.cluster {
			what = "--redis (a Cluster)"
		}
		return nil, urlUsage(what, a.conn.redis, "redis://host[:port][/db], with USER:PASSWORD@ before the host if needed", errors.New("misread user info"))
	}
	if a.conn.cluster {
		opts, err := redis.ParseClusterURL(a.conn.redis)
		if err != nil {
			return nil, urlUsage("--redis (a Cluster)", a.conn.redis, "redis://host:port?addr=host2:port2, with USER:PASSWORD@ before the first host if needed", err)
		}
		opts.DialerRetries = 1
		return redis.NewClusterClient(opts), nil
	}
	opts, err := redis.ParseURL(a.conn.redis)
	if err != nil {
		return nil, urlUsage("--redis", a.conn.redis, "redis://host[:port][/db], with USER:PASSWORD@ before the host if needed", err)
	}
	opts.DialerRetries = 1
	return redis.NewClient(opts), nil
}

// urlUsage is the usage error of flag, whose URL raw did not parse (err),
// form its shape. It quotes neither raw nor, when raw holds user info
// ('@'), err's text, which quotes the URL or a part of it: a password that
// holds a character the URL parser stops at ('/', '?', '#', '@', a space)
// is past what the redactor can tell is a password, and would be printed.
func urlUsage(flag, raw, form string, err error) error {
	if strings.Contains(raw, "@") {
		if err == nil {
			return usagef("%s: want %s (the URL is not shown: it holds user info)", flag, form)
		}
		return usagef("%s: not a valid URL (want %s; percent-encode any '@', ':', '/', '?', '#', '%%' or space in the user name or password)", flag, form)
	}
	if err == nil {
		return usagef("%s %q: want %s", flag, raw, form)
	}
	return usagef("%s: %v (want %s)", flag, err, form)
}

// misreadUserInfo reports whether raw holds an '@' that its parse did not
// take as the end of user info: a password holding '#', '/' or '?' whose
// part before it reads as a port ("http://u:8080#pw@host") parses without
// error, as host u with the password in the fragment or path, which an
// error or a request would then print, and which would connect elsewhere.
// Such a URL is refused as malformed (urlUsage).
func misreadUserInfo(raw string) bool {
	if !strings.Contains(raw, "@") {
		return false
	}
	u, err := url.Parse(raw)
	return err != nil || u.User == nil || strings.Contains(u.Host, "@") || strings.Contains(u.Fragment, "@") ||
		strings.Contains(u.Path, "@") || strings.Contains(u.RawQuery, "@")
}

// openPG connects to --pg (a pgx connection string or URL). The caller
// closes the connection.
func (a *app) openPG(ctx context.Context) (*pgx.Conn, error) {
	if a.conn.pg == "" {
		return nil, usagef("this command needs Postgres: --pg URL or DATABASE_URL")
	}
	cfg, err := pgx.ParseConfig(a.conn.pg)
	if err != nil {
		return nil, usagef("--pg: %v", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return conn, nil
}
