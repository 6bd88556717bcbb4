package main

import (
	"net/http"
	"os"
)

// credentials returns the monitor API user and password: --user and --password, else
// $TITAN_MONITOR_USER and $TITAN_MONITOR_PASSWORD ("" user: none).
func (g *globalOptions) credentials() (user, password string) {
	user, password = g.user, g.passwd
	if user == "" {
		user = os.Getenv(userEnv)
	}
	if password == "" {
		password = os.Getenv(passwordEnv)
	}
	return user, password
}

// authorize sets the request's credentials: HTTP Basic for a user, else the bearer token.
func (c *apiClient) authorize(req *http.Request) {
	switch {
	case c.user != "":
		req.SetBasicAuth(c.user, c.pass)
	case c.token != "":
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}
