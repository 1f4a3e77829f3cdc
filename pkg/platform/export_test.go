package platform

import "time"

// SetIDTokenClock replaces the clock by which s decides that a cached token is due for refresh,
// so that tests reach the refresh point without waiting for it.
func SetIDTokenClock(s *IDTokenSource, now func() time.Time) { s.now = now }

// IDTokenRefreshMargin is idTokenRefreshMargin, for tests.
const IDTokenRefreshMargin = idTokenRefreshMargin

// SetAdmissionHold sets the moving average of how long admitted requests held their slot, from
// which a customer's request past the limit expects its wait.
func SetAdmissionHold(s *Server, d time.Duration) { s.admission.hold.Store(int64(d)) }
