// Package main is the ribkeeper binary (placeholder until main.go lands).
package main

import (
	_ "github.com/BurntSushi/toml"
	_ "github.com/hashicorp/go-hclog"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/mattn/go-sqlite3"
	_ "github.com/osrg/gobgp/v3/api"
	_ "github.com/osrg/gobgp/v3/pkg/apiutil"
	_ "github.com/osrg/gobgp/v3/pkg/packet/bgp"
	_ "github.com/osrg/gobgp/v3/pkg/server"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {}
