package outboxlib

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spanmart/spanmart/pkg/platform"
)

// DefaultMaxAttempts is how many failed answers (transient or malformed) a consumer gives one event
// before it parks the event in DeadLetters. With the subscriber queues' back-off (100 ms doubling
// to 60 s) twenty answers span about 12 minutes: long enough to ride out a short outage of the
// consumer's database, short enough that a poison event does not block its aggregate for long.
// Early answers do not count (DefaultEarlyPatience bounds them), nor do attempts the consumer never
// answered.
const DefaultMaxAttempts = 20

// ConsumerEnv is what a service that consumes events reads from its environment:
//
//	OIDC_ISSUER          issuer of the deliveries' ID tokens; default https://accounts.google.com
//	                     (locally the Cloud Tasks emulator's issuer URL)
//	OIDC_AUDIENCE        required; the audience the tokens must carry (the service's own URL)
//	OIDC_ALLOWED_EMAILS  required; comma-separated accounts allowed to deliver events (the relay's)
//	EVENTS_MAX_ATTEMPTS  failed answers (transient, malformed) to one event before it is
//	                     dead-lettered; default 20
//	ADMIN_ALLOWED_EMAILS optional; comma-separated accounts allowed on the operator endpoints (dead
//	                     letters, replays, the service's own /admin/*: their Google ID tokens for the
//	                     service's own URL); none: nobody may
//	ADMIN_DELEGATE_EMAILS optional; allowed accounts that may act on behalf of an operator
//	                     (X-Spanmart-On-Behalf-Of): the console's
//	SERVICE_ACCOUNT      optional; the account whose ID tokens the service presents (a nudge of
//	                     the relay); default the metadata server's default account. Tokens are
//	                     asked for only where a metadata server is (Cloud Run, or GCE_METADATA_HOST)
//	RELAY_URL            optional; the relay, nudged after a commit in which handlers appended events
//	RELAY_NUDGE_EVERY    the least time between two nudges; default 50ms (DefaultNudgeEvery): the
//	                     nudges made meanwhile go together after it. 0 sends each at once
//	EVENTS_EARLY_PATIENCE how long an event may stay early (its predecessor not applied) before it
//	                     is dead-lettered; default 2h (DefaultEarlyPatience). Shorter values are
//	                     for tests: in production it must outlast the relay's quarantine horizon.
type ConsumerEnv struct {
	Issuer        string
	Audience      string
	AllowedEmails []string
	MaxAttempts   int
	EarlyPatience time.Duration
	RelayURL      string
	NudgeEvery    time.Duration
	Operators     []string
	Delegates     []string
	// Tokens are the service's own ID tokens (nil where there is no metadata server).
	Tokens TokenSource
}

// LoadConsumerEnv reads the variables; problems go to env.Err().
func LoadConsumerEnv(env *platform.Env) ConsumerEnv {
	return ConsumerEnv{
		Issuer:        env.URL("OIDC_ISSUER", GoogleIssuer),
		Audience:      env.Required("OIDC_AUDIENCE"),
		AllowedEmails: env.List("OIDC_ALLOWED_EMAILS", true),
		MaxAttempts:   env.Int("EVENTS_MAX_ATTEMPTS", DefaultMaxAttempts, 1, 1000),
		RelayURL:      env.URL("RELAY_URL", ""),
		NudgeEvery:    env.Duration("RELAY_NUDGE_EVERY", DefaultNudgeEvery, 0, time.Second),
		Operators:     env.List("ADMIN_ALLOWED_EMAILS", false),
		Delegates:     env.List("ADMIN_DELEGATE_EMAILS", false),
		Tokens:        OwnTokens(env),
		EarlyPatience: env.Duration("EVENTS_EARLY_PATIENCE", DefaultEarlyPatience, time.Millisecond, 48*time.Hour),
	}
}

// NewConsumer returns the consumer called name (its ProcessedEvents.Consumer, which is also the
// service's name and the relay's name for its database, so its nudges name that source)
// configured by ce. nudger is the service's one nudger of the relay (NewNudger; nil nudges
// nothing), which the service's own commits use too: one nudger a service, so that all its
// nudges go together, at most one request per interval.
func (ce ConsumerEnv) NewConsumer(name string, client *spanner.Client, reg prometheus.Registerer, nudger *Nudger) (*Consumer, error) {
	verifier, err := NewVerifier(VerifierConfig{Issuer: ce.Issuer, Audiences: []string{ce.Audience}, AllowedEmails: ce.AllowedEmails})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", name, err)
	}
	operators, err := NewOperators(ce.Issuer, ce.Audience, ce.Operators, ce.Delegates)
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", name, err)
	}
	return NewConsumer(ConsumerConfig{Name: name, Client: client, Verifier: verifier, MaxAttempts: ce.MaxAttempts, EarlyPatience: ce.EarlyPatience, Registerer: reg,
		Operators: operators, Nudger: nudger})
}

// NewNudger returns the service's nudger of the relay (nil without RELAY_URL), presenting the
// service's own ID tokens where it has them, at most one request per RELAY_NUDGE_EVERY.
func (ce ConsumerEnv) NewNudger(source string) *Nudger {
	return NewNudger(ce.RelayURL, source).WithTokens(ce.Tokens).Every(ce.NudgeEvery)
}

// TokenSource gets ID tokens for an audience (platform.IDTokenSource).
type TokenSource interface {
	Token(ctx context.Context, audience string) (string, error)
}

// OwnTokens returns the service's own ID token source, for its account (SERVICE_ACCOUNT, default
// the metadata server's default account), where a metadata server is: on Cloud Run (K_REVISION)
// or where GCE_METADATA_HOST names one (locally, the Tasks emulator). Elsewhere (a unit test) nil:
// the service sends no token rather than wait for a metadata server that is not there.
func OwnTokens(env *platform.Env) TokenSource {
	account := env.Lookup("SERVICE_ACCOUNT")
	if env.Lookup("K_REVISION") == "" && env.Lookup("GCE_METADATA_HOST") == "" {
		return nil
	}
	var opts []platform.IDTokenOption
	if account != "" {
		opts = append(opts, platform.WithServiceAccount(account))
	}
	return platform.NewIDTokenSource(nil, opts...)
}
