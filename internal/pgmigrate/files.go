package pgmigrate

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing/fstest"
	"time"
)

// Files returns the migrations of fsys ("migrations/NNN_name.sql") as a
// migration tool reads them: at the root of the returned fs.FS, named
// NNN_name.up.sql (golang-migrate's form, which atlas and goose also
// read), placeholders replaced by r, each wrapped in goose's annotations
// ("-- +goose Up" and a StatementBegin/End pair, so goose runs the file as
// one statement, dollar-quoted blocks included), which are SQL comments to
// every other tool. The advisory lock of Script is left out: the tool
// serializes its own runs. Every file is idempotent, as for Migrate.
func Files(fsys fs.ReadFileFS, r *strings.Replacer) (fs.FS, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	out := fstest.MapFS{}
	for _, name := range names {
		text, err := fsys.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		body := "-- +goose Up\n-- +goose StatementBegin\n" + expand(r.Replace(string(text))) + "\n-- +goose StatementEnd\n"
		out[strings.TrimSuffix(path.Base(name), ".sql")+".up.sql"] = &fstest.MapFile{
			Data: []byte(body), Mode: 0o444, ModTime: time.Unix(0, 0),
		}
	}
	return out, nil
}
