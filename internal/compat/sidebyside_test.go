package compat_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redistest"
)

// worker is one build of testdata/sidebyside running as a process.
type worker struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
}

func (w *worker) do(cmd string) string {
	w.t.Helper()
	_, err := fmt.Fprintln(w.in, cmd)
	require.NoError(w.t, err)
	require.True(w.t, w.out.Scan(), "worker answered %q: %v", cmd, w.out.Err())
	return w.out.Text()
}

// take runs "take" and returns the token; the writes with it must pass.
func (w *worker) take() uint64 {
	w.t.Helper()
	f := strings.Fields(w.do("take"))
	require.Len(w.t, f, 4)
	require.Equal(w.t, []string{"took", "redis=ok", "pg=ok"}, []string{f[0], f[2], f[3]})
	tok, err := strconv.ParseUint(f[1], 10, 64)
	require.NoError(w.t, err)
	return tok
}

// build compiles testdata/sidebyside in the module rooted at dir.
func build(t *testing.T, dir, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, "./cmd/compat-sidebyside")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "build in %s:\n%s", dir, b)
}

// checkout writes the tree of commit into dir, with the worker's source
// in it at cmd/compat-sidebyside.
func checkout(t *testing.T, root, commit, dir string) {
	t.Helper()
	var archive bytes.Buffer
	cmd := exec.Command("git", "archive", "--format=tar", commit)
	cmd.Dir, cmd.Stdout = root, &archive
	require.NoError(t, cmd.Run())
	tr := tar.NewReader(&archive)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(path, 0o755))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, b, 0o644))
		}
	}
	copyWorker(t, dir)
}

func copyWorker(t *testing.T, root string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "sidebyside", "main.go"))
	require.NoError(t, err)
	dst := filepath.Join(root, "cmd", "compat-sidebyside")
	require.NoError(t, os.MkdirAll(dst, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dst, "main.go"), src, 0o644))
}

// Two builds side by side, the current one and one of an earlier commit
// of the same stored format (testdata/sidebyside_base), on one Redis and
// one PostgreSQL: both take the same lease, in turns, and write through
// redisfence and pgfence; the tokens of both grow as one sequence, and a
// write with a holder the other build has superseded is refused by both
// sinks, either way round.
func TestTwoBuildsSideBySide(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an earlier commit")
	}
	t.Parallel()
	base, err := os.ReadFile(filepath.Join("testdata", "sidebyside_base"))
	require.NoError(t, err)
	commit := strings.TrimSpace(string(base))
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	root := strings.TrimSpace(string(top))
	if exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").Run() != nil {
		t.Skipf("commit %s is not in this clone (a shallow clone): fetch the history to run this test", commit)
	}

	dir := t.TempDir()
	oldTree := filepath.Join(dir, "old")
	checkout(t, root, commit, oldTree)
	build(t, oldTree, filepath.Join(dir, "old-worker"))
	// The current build: the worker's source where it is, in this module.
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "current-worker"), "./testdata/sidebyside")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "build the current worker:\n%s", b)

	require.Empty(t, sideBySide(t, dir, "on"), "violations")
	// The control: with the old build not fencing (FENCE=off), its
	// superseded holder's writes land, and the same checks catch them.
	control := sideBySide(t, dir, "off")
	require.NotEmpty(t, control, "control: a build that does not fence passed the side-by-side checks")
	t.Logf("control caught: %s", strings.Join(control, "; "))
}

// sideBySide runs the old and the current worker of dir against one Redis
// and one PostgreSQL, the old one fencing or not (oldFence "on" or "off"),
// and returns the violations it saw.
func sideBySide(t *testing.T, dir, oldFence string) (violations []string) {
	expect := func(what, want, got string) {
		if want != got {
			violations = append(violations, fmt.Sprintf("%s: want %q, got %q", what, want, got))
		}
	}
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	pool := shared.Pool(t)
	schema := pgtest.Schema(t, pool, "compat_")
	// The effects table, made here once: the workers start together, and
	// two concurrent CREATE TABLE IF NOT EXISTS can collide in Postgres.
	_, err := pool.Exec(t.Context(), `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()+
		`; CREATE TABLE `+pgx.Identifier{schema, "effects"}.Sanitize()+` (who text NOT NULL, token bigint NOT NULL)`)
	require.NoError(t, err)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := "sidebyside-" + hex.EncodeToString(rnd[:])
	t.Cleanup(func() { rdb.Del(t.Context(), name) })

	start := func(bin, who, fenced string) *worker {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "REDIS_URL="+redistest.URL(), "DATABASE_URL="+pgtest.URL(),
			"PREFIX="+prefix, "SCHEMA="+schema, "NAME="+name, "WHO="+who, "FENCE="+fenced)
		in, err := cmd.StdinPipe()
		require.NoError(t, err)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = in.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("%s worker: %v\n%s", who, err, stderr.String())
			}
		})
		return &worker{t: t, in: in, out: bufio.NewScanner(out)}
	}
	old := start(filepath.Join(dir, "old-worker"), "old", oldFence)
	cur := start(filepath.Join(dir, "current-worker"), "current", "on")

	t1 := old.take()
	t2 := cur.take()
	require.Greater(t, t2, t1, "the current build's token follows the old build's")
	expect("the old build's superseded holder", "redis=stale pg=stale", old.do("write"))
	t3 := old.take()
	require.Greater(t, t3, t2, "the old build's token follows the current build's")
	expect("the current build's superseded holder", "redis=stale pg=stale", cur.do("write"))
	expect("the latest holder again", "redis=ok pg=ok", old.do("write"))

	expect("the Redis value", "old "+strconv.FormatUint(t3, 10), rdb.Get(t.Context(), name).Val())
	rows, err := pool.Query(t.Context(), `SELECT who || ' ' || token FROM `+pgx.Identifier{schema, "effects"}.Sanitize()+` ORDER BY token, who`)
	require.NoError(t, err)
	effects, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	expect("the accepted writes", strings.Join([]string{
		"old " + strconv.FormatUint(t1, 10),
		"current " + strconv.FormatUint(t2, 10),
		"old " + strconv.FormatUint(t3, 10),
		"old " + strconv.FormatUint(t3, 10),
	}, ", "), strings.Join(effects, ", "))
	return violations
}
