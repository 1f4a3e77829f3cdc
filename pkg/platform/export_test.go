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

// SetAdmissionClock replaces the clock by which admission control times how long requests wait
// in line, so that tests make a line stand without waiting for it.
func SetAdmissionClock(s *Server, now func() time.Time) {
	s.admission.lineMu.Lock()
	defer s.admission.lineMu.Unlock()
	s.admission.now = now
}
