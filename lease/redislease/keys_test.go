package redislease_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

func TestRedisBackendKeysLayout(t *testing.T) {
	t.Parallel()
	b, err := redislease.NewBackend(redistest.Mini(t), redislease.Options{Prefix: "p:"})
	require.NoError(t, err)
	k, err := b.Keys("job")
	require.NoError(t, err)
	require.Equal(t, redislease.Keys{
		Lease: "p:{job}", Fence: "p:{job}:fence", Waiting: "p:{job}:waiting", Holder: "p:{job}:holder", Released: "p:{job}:released",
	}, k)
	require.Equal(t, "p:{job}:leader", k.Tagged("leader"))
}

// A brace in the name would move the hash tag (Redis hashes the text
// between the first '{' and the first '}' after it): Keys refuses it, as
// TryAcquire does, instead of returning keys in different slots.
func TestRedisBackendKeysRefuseNamesThatMoveTheHashTag(t *testing.T) {
	t.Parallel()
	b, err := redislease.NewBackend(redistest.Mini(t), redislease.Options{})
	require.NoError(t, err)
	for _, name := range []string{"a}b{c", "a{b}", "}", "{", "", strings.Repeat("x", leasedriver.MaxNameLen+1),
		"\x00", "a\nb", "tab\t", "del\x7f", "c1\u0085", "bad\xffutf8", " ", "\u3000", "eu\u200b", "\u202eue"} {
		k, err := b.Keys(name)
		require.ErrorIs(t, err, lease.ErrInvalidName, "name %q", name)
		require.Zero(t, k, "name %q", name)
	}
	for _, name := range []string{"ü€𝄞", "job:2026-03-08T02:00:00Z:eu", " a ", "a|b"} {
		_, err := b.Keys(name)
		require.NoError(t, err, "name %q", name)
	}
	_, err = redislease.NewBackend(redistest.Mini(t), redislease.Options{Prefix: "a{"})
	require.ErrorIs(t, err, lease.ErrInvalidOptions)
}

// hashTag is the part of key Redis Cluster hashes: the text between the
// first '{' and the first '}' after it, when not empty; the whole key
// otherwise (https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#hash-tags).
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

// Every key Keys returns hashes to the lease name's slot.
func FuzzRedisBackendKeysShareTheNamesHashTag(f *testing.F) {
	for _, s := range []string{"job", "a}b{c", "{x}", "a:b", "x}"} {
		f.Add(s)
	}
	b, err := redislease.NewBackend(redistest.Mini(f), redislease.Options{})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, name string) {
		k, err := b.Keys(name)
		if err != nil {
			require.ErrorIs(t, err, lease.ErrInvalidName)
			return
		}
		for _, key := range []string{k.Lease, k.Fence, k.Waiting, k.Holder, k.Released, k.Tagged("leader")} {
			require.Equal(t, name, hashTag(key), "key %q", key)
		}
	})
}
