package httpfence_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The middleware imports neither go-redis nor pgx: the stores that need
// them live in redisstore and pgstore.
func TestImportsNoStoreDriver(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	out, err := exec.CommandContext(t.Context(), gobin, "list", "-deps", ".").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/holdfast-go/holdfast/fence", "the listing is of this package")
	for _, d := range deps {
		require.False(t, strings.HasPrefix(d, "github.com/jackc/pgx") || strings.HasPrefix(d, "github.com/redis/go-redis"), "httpfence imports %s", d)
	}
}
