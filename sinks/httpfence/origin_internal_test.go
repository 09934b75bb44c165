package httpfence

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// origin fills in the scheme's default port and ignores case, so that a
// redirect between spellings of one origin stays same-origin, and any other
// scheme, host or port differs.
func TestOrigin(t *testing.T) {
	t.Parallel()
	same := [][2]string{
		{"http://Svc.example/a", "http://svc.example:80/b?x=1"},
		{"https://svc.example/a", "HTTPS://svc.example:443/"},
		{"http://[::1]:8080/a", "http://[::1]:8080/b"},
	}
	differ := [][2]string{
		{"http://svc.example/a", "https://svc.example/a"},
		{"http://svc.example/a", "http://svc.example:8080/a"},
		{"http://svc.example/a", "http://evil.example/a"},
		{"http://svc.example/a", "http://svc.example.evil/a"},
	}
	parse := func(s string) *url.URL {
		u, err := url.Parse(s)
		require.NoError(t, err)
		return u
	}
	for _, p := range same {
		require.Equal(t, origin(parse(p[0])), origin(parse(p[1])), "%s %s", p[0], p[1])
	}
	for _, p := range differ {
		require.NotEqual(t, origin(parse(p[0])), origin(parse(p[1])), "%s %s", p[0], p[1])
	}
	require.Equal(t, "http://svc.example:80", origin(parse("http://SVC.example/x")))
}
