package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/internal/localcloud"
	"github.com/spanmart/spanmart/internal/topology"
)

// devTasksHTTPPort is the dev stack's Tasks emulator HTTP port before -port-offset (its OIDC
// issuer and metadata server; emulator/devstack/ports.go).
const devTasksHTTPPort = 8124

// devHost is where the dev stack listens.
const devHost = "127.0.0.1"

// devOperator is the account the dev stack allows on every operator endpoint.
func devOperator() string { return localcloud.Operator }

// Environment variables of -env prod.
const (
	envURLs  = "SPANMART_URLS"  // name=url,... when -urls is not given
	envToken = "SPANMART_TOKEN" // a fixed ID token (gcloud auth print-identity-token) instead of the metadata server's
)

// newClient builds the client of the environment o names.
func newClient(o options, getenv func(string) string) (*adminclient.Client, error) {
	var (
		urls   map[string]string
		tokens adminclient.Tokens
	)
	switch o.env {
	case "dev":
		urls = devURLs(o.portOffset)
		as := o.as
		if as == "" {
			as = devOperator()
		}
		tokens = adminclient.NewMetadataTokens(adminclient.MetadataOptions{Account: as, Host: devTasksHost(o.portOffset)})
	case "prod":
		urls = map[string]string{}
		if o.urls == "" && getenv(envURLs) == "" {
			return nil, fmt.Errorf("-env prod needs the services' URLs: -urls name=url,... or $%s (names: %s)", envURLs, strings.Join(topology.Names(), ", "))
		}
		if tok := getenv(envToken); tok != "" {
			if o.as != "" {
				return nil, fmt.Errorf("-as %s: $%s is set, whose token is of the account that minted it", o.as, envToken)
			}
			tokens = adminclient.FixedToken(tok)
		} else {
			tokens = adminclient.NewMetadataTokens(adminclient.MetadataOptions{Account: o.as})
		}
		if o.urls == "" {
			o.urls = getenv(envURLs)
		}
	default:
		return nil, fmt.Errorf("-env %q: want dev or prod", o.env)
	}
	given, err := parseURLs(o.urls)
	if err != nil {
		return nil, err
	}
	for name, u := range given {
		urls[name] = u
	}
	return adminclient.New(adminclient.Config{URLs: urls, Tokens: tokens})
}

// devURLs are the dev stack's service URLs: each roster service's DevPort on 127.0.0.1.
func devURLs(offset int) map[string]string {
	out := map[string]string{}
	for _, s := range topology.Services() {
		out[s.Name] = "http://" + devHost + ":" + strconv.Itoa(s.DevPort+offset)
	}
	return out
}

func devTasksHost(offset int) string { return devHost + ":" + strconv.Itoa(devTasksHTTPPort+offset) }

// parseURLs reads name=url,name=url.
func parseURLs(spec string) (map[string]string, error) {
	out := map[string]string{}
	var problems []string
	for _, pair := range strings.Split(spec, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, u, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(name) == "" || strings.TrimSpace(u) == "" {
			problems = append(problems, fmt.Sprintf("%q is not name=url", pair))
			continue
		}
		name = strings.TrimSpace(name)
		if _, dup := out[name]; dup {
			problems = append(problems, name+" is given twice")
			continue
		}
		out[name] = strings.TrimSpace(u)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("URLs: %s", strings.Join(problems, "; "))
	}
	return out, nil
}
