package tasksemu

import (
	"regexp"
	"strings"
	"testing"
)

// The name and header checks accept exactly what the regular expressions they replaced did: every
// byte, alone and inside a valid name, and the length limits.
func TestNameCharsMatchTheRegularExpressions(t *testing.T) {
	for _, c := range []struct {
		name string
		cs   *charSet
		max  int
		re   *regexp.Regexp
	}{
		{"project", projectChars, 0, regexp.MustCompile(`^[A-Za-z0-9.:-]+$`)},
		{"location", locChars, 0, regexp.MustCompile(`^[A-Za-z0-9-]+$`)},
		{"queue", queueChars, 100, regexp.MustCompile(`^[A-Za-z0-9-]{1,100}$`)},
		{"task", taskChars, 500, regexp.MustCompile(`^[A-Za-z0-9_-]{1,500}$`)},
		{"header", headerChars, 0, regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")},
	} {
		inputs := []string{"", "a", "Az09", strings.Repeat("a", 100), strings.Repeat("a", 101), strings.Repeat("a", 500), strings.Repeat("a", 501), "é"}
		for b := range 256 {
			inputs = append(inputs, string([]byte{byte(b)}), "a"+string([]byte{byte(b)})+"Z")
		}
		for _, in := range inputs {
			if got, want := c.cs.matches(in, c.max), c.re.MatchString(in); got != want {
				t.Errorf("%s %q: matches %v, the regular expression %v", c.name, in, got, want)
			}
		}
	}
}
