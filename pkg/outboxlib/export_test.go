package outboxlib

import "time"

// SetVerifierClock replaces the clock of v (tests of expiry and of the JWKS refresh rate limit).
func SetVerifierClock(v *Verifier, now func() time.Time) { v.now = now }
