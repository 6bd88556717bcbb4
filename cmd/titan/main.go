// Command titan is the Titan STOMP broker (`titan serve`) and its operator command line
// (`titan queue …`, the dashboard).
package main

import "os"

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}
