package httpfence_test

import "time"

// The defaults the Options and ClientOptions fields document; the tests
// that use them check that an unset field behaves so.
const (
	docBaseDelay       = 100 * time.Millisecond // Transport.BaseDelay
	docMaxDelay        = 10 * time.Second       // Transport.MaxDelay
	docMaxTokenAhead   = 5 * time.Minute        // Options.MaxTokenAhead
	docMaxSignatureAge = 5 * time.Minute        // Options.MaxSignatureAge
)
