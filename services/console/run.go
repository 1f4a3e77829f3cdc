package main

import (
	"context"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/services/console/internal/auth"
	"github.com/spanmart/spanmart/services/console/internal/web"
)

// run serves until ctx is done, then shuts down gracefully.
func run(ctx context.Context, cfg config, log *zap.Logger) error {
	authn, err := auth.New(auth.Config{Issuer: cfg.Issuer, Audience: cfg.Audience, IAP: cfg.IAP, Allowed: cfg.Operators})
	if err != nil {
		return err
	}
	// The console's own ID tokens, for each service's URL: the metadata server's (Cloud Run's
	// service account; locally the Tasks emulator, for SERVICE_ACCOUNT).
	client, err := adminclient.New(adminclient.Config{
		URLs: cfg.URLs, Tokens: adminclient.NewMetadataTokens(adminclient.MetadataOptions{Account: cfg.ServiceAccount}),
	})
	if err != nil {
		return err
	}
	console, err := web.New(web.Config{Client: client, Auth: authn, Refresh: cfg.Refresh, Timeout: cfg.Timeout})
	if err != nil {
		return err
	}
	srv := platform.NewServer(cfg.ServerOptions(log))
	srv.Echo.Pre(auth.HideLoginToken)
	console.Register(srv.Echo)
	signIn := zap.String("audience", cfg.Audience)
	if authn.BehindIAP() {
		signIn = zap.String("iap_audience", cfg.IAP.Audience)
	}
	return srv.Run(ctx, cfg.Config, signIn, zap.Strings("operators", cfg.Operators))
}
