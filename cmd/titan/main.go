// Command titan is the Titan STOMP broker (`titan serve`) and its operator command line
// (`titan queue …`, the dashboard).
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "titan:", err)
		os.Exit(1)
	}
}
