package ledger

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxIdempotencyKeyLen is the longest key IdempotencyKey returns (255
// bytes): httpfence.MaxKeyLen, the longest Idempotency-Key the HTTP sink
// accepts (this package imports no sink).
const MaxIdempotencyKeyLen = 255

// longKeyMark separates the kept prefix of a long key from its hash. Key
// never holds it: in Key, '%' only ever starts an escape of two upper-case
// hex digits.
const longKeyMark = "%#"

// IdempotencyKey is the key a run passes to the sinks (scheduler's
// Run.IdempotencyKey): Key when that is at most MaxIdempotencyKeyLen
// bytes, else Key's first 189 bytes, "%#" and the lower-case hex SHA-256
// of the whole Key, 255 bytes in all. Printable ASCII like Key, and the
// same in every build: downstream stores keep it, so its form never
// changes.
//
// It is injective as Key is (a collision would need one of SHA-256):
//   - two short keys are two Keys, which differ;
//   - a short key and a long one never meet: a long one holds "%#", and
//     in Key every '%' is followed by two upper-case hex digits (a cut
//     escape before the mark, "...%C" + "%#", is no escape either);
//   - two long keys differ where their Keys' hashes do.
//
// A job name (MaxJobNameLen, 200) and a partition (MaxPartitionLen, 48) of
// printable ASCII give a Key of up to 270 bytes, and escapes triple a
// byte, so long keys happen with long names. The ledgers identify a slot
// by Key, whatever its length.
func (s Slot) IdempotencyKey() string {
	k := s.Key()
	if len(k) <= MaxIdempotencyKeyLen {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return k[:MaxIdempotencyKeyLen-len(longKeyMark)-2*sha256.Size] + longKeyMark + hex.EncodeToString(sum[:])
}
