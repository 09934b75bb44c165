package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// maxResponseBytes bounds an admin response read into memory.
const maxResponseBytes = 16 << 20

// adminClient calls a service's admin handler (scheduler/schedhttp),
// ADMIN_API v1.
type adminClient struct {
	base  *url.URL
	token string
	http  *http.Client
}

// adminClient returns the client of --admin, or a usage error without it.
func (a *app) adminClient() (*adminClient, error) {
	if a.conn.admin == "" {
		return nil, usagef("this command needs the admin handler: --admin URL or HOLDFAST_ADMIN")
	}
	u, err := url.Parse(a.conn.admin)
	if err == nil && misreadUserInfo(a.conn.admin) {
		err = errors.New("misread user info")
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, urlUsage("--admin", a.conn.admin, "an http(s) URL such as http://127.0.0.1:8080/admin/", err)
	}
	a.warnPlainToken(u)
	return &adminClient{base: u, token: a.conn.token, http: http.DefaultClient}, nil
}

// path returns the URL of the path segments under the base, each escaped.
func (c *adminClient) url(query url.Values, segments ...string) string {
	esc := make([]string, len(segments))
	for i, s := range segments {
		esc[i] = url.PathEscape(s)
	}
	u := c.base.JoinPath(esc...)
	u.RawQuery = query.Encode()
	return u.String()
}

// do sends method to the URL with body (JSON, nil for none) and decodes a
// 2xx reply into out (nil to discard). An error reply becomes an error
// with its exit code: 400 usage, 404 not found, 401/403/409 refused.
func (c *adminClient) do(ctx context.Context, method, target string, body, out any) error {
	var rd io.Reader
	if body == nil && method == http.MethodPost {
		body = struct{}{} // {}: the admin handler takes JSON actions only
	}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("admin: %s %s: reading the reply: %w", method, target, err)
	}
	if resp.StatusCode >= 300 {
		return problemError(method, req.URL.Path, resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("admin: %s %s: decoding the reply: %w", method, req.URL.Path, err)
	}
	return nil
}

// problemError reads an RFC 9457 problem body (or any text) into an error
// with the status's exit code.
func problemError(method, path string, status int, data []byte) error {
	detail := strings.TrimSpace(string(data))
	var p schedhttp.Problem
	if json.Unmarshal(data, &p) == nil && (p.Detail != "" || p.Title != "") {
		detail = p.Title
		if p.Detail != "" {
			detail = p.Detail
		}
	}
	err := fmt.Errorf("admin: %s %s: %d %s: %s", method, path, status, http.StatusText(status), detail)
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return &codedError{code: exitUsage, err: err}
	case http.StatusNotFound:
		return &codedError{code: exitNotFound, err: err}
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusConflict:
		return &codedError{code: exitRefused, err: err}
	}
	return err
}

// errNoAdmin is what commands with an optional admin path return when
// neither a direct connection nor --admin is given.
var errNoAdmin = errors.New("no connection: give --redis URL (REDIS_URL) or --admin URL (HOLDFAST_ADMIN)")
