// Package httpapi is the HTTP interface of gateway-abstraction: its routes and request and response types.
// The platform server provides /healthz, /readyz, /metrics and the error handler.
package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// Info identifies the running service.
type Info struct {
	Service string `json:"service"`
	Version string `json:"version"`
}

// Register adds the service's routes to e.
func Register(e *echo.Echo, info Info) {
	e.GET("/", func(c echo.Context) error { return c.JSON(http.StatusOK, info) })
}
