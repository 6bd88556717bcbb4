<?php
// Scenarios driven through PHP's PECL stomp extension (Debian's php-stomp, with php-cli) for
// Titan's end-to-end tests.
//
// Usage: php phpclient.php SCENARIO 'JSON-ARGS'
//
// Every scenario prints what it observed as one JSON object on stdout (the Go test asserts on
// it) and exits 0; a scenario that could not run to the end (a wait timed out, a call
// failed) still prints what it saw, with an "error" field. Scripts never assert: they
// observe. Waits are bounded by the "timeout" argument (seconds).
//
// PECL stomp reads a frame with a content-length body and then two octets: the NUL and, when
// there is one, a line feed; anything else fails the read. Every frame here goes through
// that reader.

class Timeout extends Exception {}

// Client is one PECL connection with what it read: frames are kept in arrival order, and
// reads that failed (readFrame returned false although a frame was pending) are counted.
class Client {
    public $s;
    public $messages = [];
    public $other = [];
    public $failedReads = 0;
    public $errors = [];
    private $timeout;
    private static $rid = 0;

    function __construct($args, $version = "1.2") {
        $headers = ["host" => "/"];
        if ($version !== "1.0") {
            $headers["accept-version"] = $version;
        }
        $this->timeout = $args["timeout"];
        $this->s = new Stomp("tcp://" . $args["host"] . ":" . $args["port"], "", "", $headers);
        $this->s->setReadTimeout(0, 200000);
    }

    function rid($prefix) { return $prefix . "-" . (++self::$rid); }

    // poll reads one frame if one is pending; it returns true when it read something.
    function poll() {
        try {
            if (!$this->s->hasFrame()) {
                return false;
            }
            $f = $this->s->readFrame();
        } catch (StompException $e) {
            $this->errors[] = ["message" => $e->getMessage(), "details" => $e->getDetails()];
            return true;
        }
        if ($f === false) {
            $this->failedReads++;
            return true;
        }
        $rec = ["command" => $f->command, "headers" => $f->headers, "body_hex" => bin2hex((string)$f->body)];
        if ($f->command === "MESSAGE") {
            $this->messages[] = $rec;
        } else {
            $this->other[] = $rec;
        }
        return true;
    }

    // waitFor polls until pred($this) holds, throwing Timeout after the scenario timeout.
    function waitFor($pred, $what) {
        $deadline = microtime(true) + $this->timeout;
        while (!$pred($this)) {
            if (microtime(true) > $deadline) {
                throw new Timeout("timed out waiting for " . $what);
            }
            if (!$this->poll()) {
                usleep(10000);
            }
        }
    }

    function waitMessages($n, $what) {
        $this->waitFor(function ($c) use ($n) { return count($c->messages) >= $n; }, $what);
    }

    // close disconnects (the extension's destructor sends DISCONNECT).
    function close() {
        $this->s = null;
    }
}

function body($rec) { return hex2bin($rec["body_hex"]); }

function bodies($msgs) { return array_map("body", $msgs); }

// sc_connect: CONNECT at 1.2 and at 1.0 (no accept-version), the session of each.
function sc_connect($args, &$out) {
    foreach (["1.2", "1.0"] as $v) {
        $c = new Client($args, $v);
        $out["session_" . str_replace(".", "", $v)] = $c->s->getSessionId();
        $c->close();
    }
}

// sc_burst: args["count"] messages sent (each with a receipt) to a queue before any
// subscriber exists, then one ack:auto subscriber reads them.
function sc_burst($args, &$out) {
    $dest = $args["dest"];
    $p = new Client($args);
    $out["sent"] = [];
    for ($i = 0; $i < $args["count"]; $i++) {
        $out["sent"][] = $p->s->send($dest, "burst-" . $i, ["receipt" => $p->rid("send")]);
    }
    $p->close();
    $c = new Client($args);
    $out["subscribed"] = $c->s->subscribe($dest, ["id" => "burst", "ack" => "auto", "receipt" => $c->rid("sub")]);
    try {
        $c->waitMessages($args["count"], $args["count"] . " messages");
    } finally {
        $out["messages"] = $c->messages;
        $out["other"] = $c->other;
        $out["failed_reads"] = $c->failedReads;
        $out["errors"] = $c->errors;
        $c->close();
    }
}

// sc_receipts: a subscriber that has MESSAGEs waiting unread sends frames with receipts:
// every receipt must be matched (PECL reads on, stacking the MESSAGEs, until the RECEIPT)
// and every MESSAGE read afterwards intact.
function sc_receipts($args, &$out) {
    $dest = $args["dest"];
    $c = new Client($args);
    $p = new Client($args);
    $out["subscribed"] = $c->s->subscribe($dest, ["id" => "r", "ack" => "auto", "receipt" => $c->rid("sub")]);
    $out["receipted"] = [];
    try {
        for ($round = 0; $round < 3; $round++) {
            for ($i = 0; $i < 4; $i++) {
                $p->s->send($dest, "r" . $round . "-" . $i, ["receipt" => $p->rid("p")]);
            }
            // The four MESSAGEs are on their way to c (the RECEIPTs to p prove they were
            // routed); c's own SEND with a receipt now reads past them.
            $out["receipted"][] = $c->s->send($args["other_dest"], "x", ["receipt" => $c->rid("c")]);
        }
        $c->waitMessages(12, "12 messages");
    } finally {
        $out["messages"] = $c->messages;
        $out["other"] = $c->other;
        $out["failed_reads"] = $c->failedReads;
        $out["errors"] = $c->errors;
        $c->close();
        $p->close();
    }
}

// sc_transaction: on one connection subscribed to dest, a MESSAGE arrives, then a
// transaction is committed with a receipt, another aborted with a receipt, and a last
// message marks the end.
function sc_transaction($args, &$out) {
    $dest = $args["dest"];
    $c = new Client($args);
    try {
        $out["subscribed"] = $c->s->subscribe($dest, ["id" => "t", "ack" => "auto", "receipt" => $c->rid("sub")]);
        $out["sent_before"] = $c->s->send($dest, "before", ["receipt" => $c->rid("s")]);
        $c->waitMessages(1, "the first message");
        // A MESSAGE is now queued to us again before the COMMIT's RECEIPT.
        $c->s->send($dest, "racing", ["receipt" => $c->rid("s")]);
        $out["begin_commit"] = $c->s->begin("tx-c");
        $c->s->send($dest, "committed-1", ["transaction" => "tx-c"]);
        $c->s->send($dest, "committed-2", ["transaction" => "tx-c"]);
        $out["commit"] = $c->s->commit("tx-c", ["receipt" => $c->rid("commit")]);
        $out["begin_abort"] = $c->s->begin("tx-a");
        $c->s->send($dest, "aborted", ["transaction" => "tx-a"]);
        $out["abort"] = $c->s->abort("tx-a", ["receipt" => $c->rid("abort")]);
        $out["sent_after"] = $c->s->send($dest, "after", ["receipt" => $c->rid("s")]);
        $c->waitFor(function ($c) { return in_array("after", bodies($c->messages), true); }, "the last message");
    } finally {
        $out["messages"] = $c->messages;
        $out["other"] = $c->other;
        $out["failed_reads"] = $c->failedReads;
        $out["errors"] = $c->errors;
        $c->close();
    }
}

// sc_ack: client-individual acknowledgement at 1.2: three messages, the first and third
// ACKed, the second NACKed (then redelivered and ACKed); a second subscriber then finds
// only a marker message. PECL passes the MESSAGE's message-id; STOMP 1.2 wants its ack
// header as the id, so it is passed explicitly.
function sc_ack($args, &$out) {
    $dest = $args["dest"];
    $p = new Client($args);
    for ($i = 0; $i < 3; $i++) {
        $p->s->send($dest, "ack-" . $i, ["receipt" => $p->rid("p")]);
    }
    $c = new Client($args);
    $out["subscribed"] = $c->s->subscribe($dest, ["id" => "ci", "ack" => "client-individual", "receipt" => $c->rid("sub")]);
    $out["acks"] = [];
    try {
        $c->waitMessages(3, "3 messages");
        foreach (array_slice($c->messages, 0, 3) as $m) {
            $frame = new StompFrame("MESSAGE", $m["headers"], body($m));
            $h = ["id" => $m["headers"]["ack"] ?? "", "receipt" => $c->rid("ack")];
            if (body($m) === "ack-1") {
                $out["acks"][] = ["nack", body($m), $c->s->nack($frame, $h)];
            } else {
                $out["acks"][] = ["ack", body($m), $c->s->ack($frame, $h)];
            }
        }
        $c->waitMessages(4, "the NACKed message again");
        $m = $c->messages[3];
        $frame = new StompFrame("MESSAGE", $m["headers"], body($m));
        $out["acks"][] = ["ack", body($m), $c->s->ack($frame, ["id" => $m["headers"]["ack"] ?? "", "receipt" => $c->rid("ack")])];
    } finally {
        $out["messages"] = $c->messages;
        $out["failed_reads"] = $c->failedReads;
        $out["errors"] = $c->errors;
        $c->close();
    }
    $p->s->send($dest, "marker", ["receipt" => $p->rid("p")]);
    $p->close();
    $d = new Client($args);
    try {
        $d->s->subscribe($dest, ["id" => "after", "ack" => "auto", "receipt" => $d->rid("sub")]);
        $d->waitFor(function ($c) { return in_array("marker", bodies($c->messages), true); }, "the marker");
    } finally {
        $out["after"] = $d->messages;
        $d->close();
    }
}

// sc_binary: every octet value 0..255 twice as a body, sent and received back.
function sc_binary($args, &$out) {
    $dest = $args["dest"];
    $body = "";
    for ($r = 0; $r < 2; $r++) {
        for ($i = 0; $i < 256; $i++) {
            $body .= chr($i);
        }
    }
    $c = new Client($args);
    try {
        $out["subscribed"] = $c->s->subscribe($dest, ["id" => "b", "ack" => "auto", "receipt" => $c->rid("sub")]);
        $out["sent"] = $c->s->send($dest, $body, ["receipt" => $c->rid("s"), "content-type" => "application/octet-stream"]);
        $c->waitMessages(1, "the binary message");
    } finally {
        $out["sent_hex"] = bin2hex($body);
        $out["messages"] = $c->messages;
        $out["failed_reads"] = $c->failedReads;
        $out["errors"] = $c->errors;
        $c->close();
    }
}

// sc_rpc: request/response through a temp-queue: a responder connection subscribes the
// query channel, a requester subscribes /temp-queue/replies and sends a request with that
// reply-to; the responder answers on the (rewritten) reply-to.
function sc_rpc($args, &$out) {
    $r = new Client($args);
    $q = new Client($args);
    try {
        $out["responder_subscribed"] = $r->s->subscribe($args["channel"], ["id" => "srv", "ack" => "auto", "receipt" => $r->rid("sub")]);
        $out["requester_subscribed"] = $q->s->subscribe("/temp-queue/replies", ["id" => "replies", "ack" => "auto", "receipt" => $q->rid("sub")]);
        for ($i = 0; $i < 3; $i++) {
            $out["requested"][] = $q->s->send($args["channel"], "question-" . $i, [
                "reply-to" => "/temp-queue/replies", "correlation-id" => "corr-" . $i,
                "timeout" => "10000", "receipt" => $q->rid("req")]);
        }
        $r->waitMessages(3, "3 requests");
        foreach ($r->messages as $m) {
            $out["answered"][] = $r->s->send($m["headers"]["reply-to"], "answer:" . body($m), [
                "correlation-id" => $m["headers"]["correlation-id"] ?? "", "receipt" => $r->rid("resp")]);
        }
        $q->waitMessages(3, "3 responses");
    } finally {
        $out["requests"] = $r->messages;
        $out["responses"] = $q->messages;
        $out["failed_reads"] = $r->failedReads + $q->failedReads;
        $out["errors"] = array_merge($r->errors, $q->errors);
        $r->close();
        $q->close();
    }
}

// sc_error: PECL does not escape header values, so a value with a backslash is an undefined
// escape at 1.2; the ERROR reaches the application as a StompException whose details are
// the ERROR body.
function sc_error($args, &$out) {
    $c = new Client($args);
    $c->s->send($args["dest"], "x", ["note" => "tab\\there"]);
    try {
        $c->waitFor(function ($c) { return count($c->errors) > 0; }, "the ERROR");
    } finally {
        $out["errors"] = $c->errors;
        $out["failed_reads"] = $c->failedReads;
    }
}

function main($argv) {
    $name = $argv[1];
    $args = json_decode($argv[2], true);
    $out = [];
    $fn = "sc_" . $name;
    if (!function_exists($fn)) {
        $out["error"] = "unknown scenario " . $name;
    } else {
        try {
            $fn($args, $out);
        } catch (Throwable $e) {
            $out["error"] = get_class($e) . ": " . $e->getMessage();
        }
    }
    echo json_encode($out, JSON_UNESCAPED_SLASHES | JSON_PARTIAL_OUTPUT_ON_ERROR), "\n";
}

main($argv);
