// Package selector compiles and evaluates JMS message selectors (JMS 2.0 §3.8.1), the
// SQL-92 conditional expressions ActiveMQ and Artemis accept in a SUBSCRIBE's selector
// header, over a message's STOMP headers.
//
// # Grammar
//
// Literals: strings in single quotes (two quotes in a row stand for one); integers in decimal, hex
// (0x1F) or octal (017), with an optional L suffix; decimals and exponents (1.5, .5, 7.,
// 6.02E23); TRUE and FALSE. Identifiers start with a letter, _ or $ and go on with letters,
// digits, _ or $; they are case-sensitive. Keywords (AND, OR, NOT, LIKE, ESCAPE, IN,
// BETWEEN, IS, NULL, TRUE, FALSE) are not. Operators, loosest first: OR; AND; NOT;
// comparisons (=, <>, <, >, <=, >=, [NOT] LIKE 'pattern' [ESCAPE 'c'], [NOT] IN ('a', …),
// [NOT] BETWEEN x AND y, IS [NOT] NULL); + and - ; * and / ; unary + and -. As in
// Artemis, a string or boolean literal cannot be an operand of <, >, <=, >=, BETWEEN or
// arithmetic, NULL appears only in IS [NOT] NULL, a LIKE pattern and an IN list are string
// literals and an ESCAPE is one character: each is a compile error naming the position.
//
// # Identifiers
//
// An identifier names a message header (a STOMP header: its value is a string), except the
// JMS header names Artemis maps for STOMP messages: JMSMessageID (message-id), JMSTimestamp
// (the broker's acceptance time, Unix milliseconds), JMSPriority (Message.Priority: the
// priority header as the queues order by it, 4 when absent), JMSCorrelationID (correlation-id), JMSType (type), JMSDeliveryMode
// ('PERSISTENT', or 'NON_PERSISTENT' for persistent:false) and JMSExpiration (the expires
// header, 0 when absent). An absent header is NULL.
//
// # Header values and types
//
// STOMP carries every header as text. ActiveMQ 5's STOMP adapter compiles each selector
// with "convert_string_expressions", so a string property compared with a number or a
// boolean is converted to it; Artemis keeps STOMP headers as string properties and has no
// such conversion (a header compared with a number is unequal there), so selectors written
// for Artemis compare strings, which behave the same under ActiveMQ's rule. Titan takes
// ActiveMQ's rule:
//
//   - = and <> between a header and a string compare strings; between a header and a
//     number the header is read as a number, and between a header and TRUE/FALSE as a
//     boolean (true or false, any case). Two headers compare as strings.
//   - <, >, <=, >=, BETWEEN and arithmetic read headers as numbers.
//   - A header that does not read as the type needed (a number in Java's Long or Double
//     syntax, with no hex or octal; a boolean) makes that comparison UNKNOWN.
//   - LIKE and IN compare strings; a number there is FALSE for LIKE, UNKNOWN for IN (as
//     ActiveMQ).
//   - Integers compare exactly, an integer and a decimal as decimals; + - * of integers is an
//     integer (wrapping as Java's long does), / is always a decimal (as ActiveMQ), and a
//     division by zero is UNKNOWN.
//
// # Three-valued logic
//
// Every comparison with a NULL operand is UNKNOWN, and AND, OR and NOT follow JMS 2.0
// §3.8.1.2's tables (FALSE AND UNKNOWN is FALSE, TRUE OR UNKNOWN is TRUE, NOT UNKNOWN is
// UNKNOWN). A message matches only when the selector is TRUE. x NOT BETWEEN a AND b is
// NOT (x BETWEEN a AND b); x NOT IN (…) and x NOT LIKE … are UNKNOWN when x is NULL.
//
// # Bounds and cost
//
// Compile refuses a selector over MaxBytes, with over MaxNodes operators and operands or
// nested deeper than MaxDepth. A compiled Selector is immutable and safe for concurrent
// use; Matches allocates nothing, and costs a few nanoseconds per operator plus one header
// scan per identifier reference.
package selector
