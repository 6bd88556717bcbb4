//go:build !linux

package main

import "os"

// watchKeys is not supported here: the dashboard quits on Ctrl-C only.
func watchKeys(*os.File) (keys <-chan byte, restore func(), ok bool) { return nil, nil, false }
