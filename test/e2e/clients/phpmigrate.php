<?php
// Migration scenarios (issue 26) driven through PHP's PECL stomp extension with Artemis's
// STOMP headers (CONNECT client-id, durable-subscription-name).
//
// Usage: php phpmigrate.php SCENARIO 'JSON-ARGS'
//
// Same contract as phpclient.php: one JSON object on stdout, an "error" field when a wait
// timed out or a call failed; the script observes, the Go test asserts.

class Timeout extends Exception {}

function connect($args, $clientID = null) {
    $h = ["host" => "/", "accept-version" => "1.2"];
    if ($clientID !== null) {
        $h["client-id"] = $clientID;
    }
    $s = new Stomp("tcp://" . $args["host"] . ":" . $args["port"], "", "", $h);
    $s->setReadTimeout(0, 200000);
    return $s;
}

// read returns the bodies of the next $n MESSAGEs of $s, bounded by the scenario timeout.
function read($s, $n, $timeout) {
    $out = [];
    $deadline = microtime(true) + $timeout;
    while (count($out) < $n) {
        if (microtime(true) > $deadline) {
            throw new Timeout("timed out after " . count($out) . " of " . $n . " messages");
        }
        if (!$s->hasFrame()) {
            usleep(10000);
            continue;
        }
        $f = $s->readFrame();
        if ($f !== false && $f->command === "MESSAGE") {
            $out[] = ["body" => (string)$f->body, "destination" => $f->headers["destination"]];
        }
    }
    return $out;
}

// sc_artemis_durable: subscribe with durable-subscription-name (args["header"], so both
// spellings run), detach, args["count"] messages published while away, reattach and read
// them; UNSUBSCRIBE naming it deletes it: a new subscription gets only "fresh".
function sc_artemis_durable($args, &$out) {
    $topic = $args["topic"];
    $sub = ["id" => "d1", "ack" => "auto", $args["header"] => $args["name"]];
    $c = connect($args, $args["client_id"]);
    $out["subscribed"] = $c->subscribe($topic, $sub + ["receipt" => "s1"]);
    $out["detached"] = $c->unsubscribe($topic, ["id" => "d1", "receipt" => "u1"]);
    $c = null;
    $p = connect($args);
    for ($i = 0; $i < $args["count"]; $i++) {
        $p->send($topic, "p" . $i, ["receipt" => "p" . $i]);
    }
    $c = connect($args, $args["client_id"]);
    $c->subscribe($topic, $sub + ["receipt" => "s2"]);
    $got = read($c, $args["count"], $args["timeout"]);
    $out["bodies"] = array_column($got, "body");
    $out["destinations"] = array_values(array_unique(array_column($got, "destination")));
    $out["deleted"] = $c->unsubscribe($topic, ["id" => "d1", $args["header"] => $args["name"], "receipt" => "u2"]);
    $p->send($topic, "while-deleted", ["receipt" => "pd"]);
    $c->subscribe($topic, $sub + ["receipt" => "s3"]);
    $p->send($topic, "fresh", ["receipt" => "pf"]);
    $out["after_delete"] = array_column(read($c, 1, $args["timeout"]), "body");
}

// sc_refused: Artemis's exclusive and no-local consumers on SUBSCRIBE: the ERROR's message.
function sc_refused($args, &$out) {
    $out["errors"] = [];
    foreach ($args["headers"] as $k => $v) {
        $s = connect($args);
        try {
            $ok = $s->subscribe($args["topic"], ["id" => "1", $k => $v, "receipt" => "r"]);
            $out["errors"][] = $ok ? "RECEIPT" : strtok((string)$s->error(), "\n"); // the message header, then the body
        } catch (StompException $e) {
            $out["errors"][] = $e->getMessage();
        }
    }
}

function main($argv) {
    $args = json_decode($argv[2], true);
    $out = [];
    $fn = "sc_" . $argv[1];
    try {
        if (!function_exists($fn)) {
            throw new Exception("unknown scenario " . $argv[1]);
        }
        $fn($args, $out);
    } catch (Throwable $e) {
        $out["error"] = get_class($e) . ": " . $e->getMessage();
    }
    echo json_encode($out, JSON_UNESCAPED_SLASHES | JSON_PARTIAL_OUTPUT_ON_ERROR), "\n";
}

main($argv);
