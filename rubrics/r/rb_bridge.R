# The testthat grader's two R processes (research-bench rubrics), started by r_launch.sh
# (`Rscript --vanilla -e 'source(Sys.getenv("RB_BRIDGE"))' ARGS`, RB_BRIDGE this file):
#
#   worker  TO_WORKER FROM_WORKER
#     the agent's uid; sources the agent's files when asked and calls its functions;
#   referee TO_WORKER FROM_WORKER TESTS REPORT CANARY HELD
#     another uid, never sources an agent file: runs the held-out testthat files (and our
#     canary file) with the agent's names bound to stubs that call the worker, evaluates every
#     expectation itself and writes the report (TSV).
#
# Only plain data crosses, over two FIFOs, framed (a 16-byte length, then the payload, at most
# 64 MiB): NULL, logical/integer/double/complex/character/raw vectors and lists, with the
# attributes names, dim, dimnames, levels, row.names and a class among factor, ordered,
# data.frame, table, Date (anything else is dropped); functions cross as handles that call
# back into the process that owns them. Never R's serialize. A value the referee decodes is
# rebuilt by this code from the tokens, so no code of the agent's ever runs in the referee.
#
# Our own functions run with R's JIT compiler off (compiling them cost more than running them
# ever does: ~0.1 s in each process); the code under test (the agent's functions in the worker,
# the held-out tests and testthat in the referee) runs with the JIT level the process started
# with, as it would without us (`ours`, `theirs`).

.rb_bridge <- new.env(parent = baseenv())
local(envir = .rb_bridge, {
  MAX_BYTES <- 64 * 1024 * 1024
  MAX_DEPTH <- 64L
  KEEP_ATTRS <- c("names", "dim", "dimnames", "levels", "row.names", "class")
  KEEP_CLASSES <- c("factor", "ordered", "data.frame", "table", "Date")
  # Condition classes the referee's testthat gives a meaning (an expectation, a skip, ...):
  # never relayed from the worker.
  DENY_CLASS <- "^(expectation|skip|testthat|rlang|vctrs|interrupt|restart|condition$|error$|warning$|message$)"

  st <- new.env()
  st$fns <- list()
  st$dead <- FALSE

  hex <- function(s) {
    vapply(s, function(x) {
      paste0("x", paste(as.character(charToRaw(enc2utf8(x))), collapse = ""))
    }, "", USE.NAMES = FALSE)
  }
  unhex <- function(h) {
    vapply(h, function(x) {
      if (!startsWith(x, "x")) stop("malformed string")
      x <- substring(x, 2L)
      if (!nzchar(x)) return("")
      if (nchar(x) %% 2L != 0L) stop("malformed string")
      r <- as.raw(strtoi(substring(x, seq(1L, nchar(x), 2L), seq(2L, nchar(x), 2L)), 16L))
      s <- rawToChar(r)
      Encoding(s) <- "UTF-8"
      s
    }, "", USE.NAMES = FALSE)
  }

  register <- function(f) {
    st$fns[[length(st$fns) + 1L]] <- f
    length(st$fns)
  }

  kept_attrs <- function(a) {
    a <- a[intersect(names(a), KEEP_ATTRS)]
    if (!is.null(a$class)) {
      cl <- as.character(a$class)
      if (length(cl) == 0L || !all(cl %in% KEEP_CLASSES)) a$class <- NULL
    }
    a
  }

  enc <- function(x, depth = 0L) {
    if (depth > MAX_DEPTH) stop("a value nested too deeply to cross between the R processes")
    if (is.null(x)) return("N")
    if (is.function(x)) return(paste("F", register(x)))
    t <- typeof(x)
    head <- switch(t, double = "d", integer = "i", logical = "l", character = "s",
                   complex = "c", raw = "r", list = "L", NULL)
    if (is.null(head)) {
      stop(sprintf("a value of type %s cannot cross between the R processes (plain data only)", t))
    }
    a <- kept_attrs(attributes(x))
    n <- length(unclass(x))
    body <- if (head == "L") {
      unlist(lapply(unclass(x), enc, depth = depth + 1L), use.names = FALSE)
    } else {
      v <- unclass(x)
      attributes(v) <- NULL
      toks <- switch(head,
        d = sprintf("%a", v),
        i = { s <- as.character(v); s[is.na(v)] <- "NA"; s },
        l = { s <- ifelse(v, "T", "F"); s[is.na(v)] <- "NA"; s },
        s = { s <- rep("NA", n); ok <- !is.na(v); s[ok] <- hex(v[ok]); s },
        c = c(rbind(sprintf("%a", Re(v)), sprintf("%a", Im(v)))),
        r = as.character(v))
      paste(toks, collapse = " ")
    }
    out <- c(paste(head, n, length(a)), body)
    for (k in names(a)) out <- c(out, hex(k), enc(a[[k]], depth + 1L))
    out
  }

  dec <- function(m, proxy, depth = 0L) {
    if (depth > MAX_DEPTH) stop("a value nested too deeply")
    take <- function() {
      if (m$i > length(m$lines)) stop("a truncated message")
      l <- m$lines[[m$i]]
      m$i <- m$i + 1L
      l
    }
    line <- take()
    if (line == "N") return(NULL)
    p <- strsplit(line, " ", fixed = TRUE)[[1]]
    if (p[1] == "F" && length(p) == 2L) {
      id <- suppressWarnings(as.integer(p[2]))
      if (is.na(id)) stop("a malformed function handle")
      return(proxy(id))
    }
    if (length(p) != 3L) stop("a malformed value header")
    n <- suppressWarnings(as.integer(p[2]))
    na <- suppressWarnings(as.integer(p[3]))
    if (is.na(n) || n < 0L || is.na(na) || na < 0L || na > 8L) stop("a malformed value header")
    x <- if (p[1] == "L") {
      v <- vector("list", n)
      for (k in seq_len(n)) {
        e <- dec(m, proxy, depth + 1L)
        if (!is.null(e)) v[[k]] <- e
      }
      v
    } else {
      data <- take()
      toks <- if (nzchar(data)) strsplit(data, " ", fixed = TRUE)[[1]] else character()
      want <- if (p[1] == "c") 2L * n else n
      if (length(toks) != want) stop("a vector of the wrong length")
      num <- function(t, conv) {
        v <- suppressWarnings(conv(t))
        if (any(is.na(v) & !(t %in% c("NA", "NaN")))) stop("an unreadable number")
        v
      }
      switch(p[1],
        d = num(toks, as.numeric),
        i = num(toks, as.integer),
        l = {
          if (!all(toks %in% c("T", "F", "NA"))) stop("an unreadable logical")
          v <- toks == "T"
          v[toks == "NA"] <- NA
          v
        },
        s = { v <- rep(NA_character_, n); ok <- toks != "NA"; v[ok] <- unhex(toks[ok]); v },
        c = {
          if (n == 0L) complex() else {
            r <- num(toks[c(TRUE, FALSE)], as.numeric)
            im <- num(toks[c(FALSE, TRUE)], as.numeric)
            complex(real = r, imaginary = im)
          }
        },
        r = {
          v <- strtoi(toks, 16L)
          if (any(is.na(v))) stop("unreadable raw bytes")
          as.raw(v)
        },
        stop("an unknown value type"))
    }
    a <- list()
    for (k in seq_len(na)) {
      nm <- unhex(take())
      a[nm] <- list(dec(m, proxy, depth + 1L))
    }
    a <- kept_attrs(a)
    if (length(a)) attributes(x) <- a
    x
  }

  send <- function(lines) {
    payload <- charToRaw(paste(c(lines, "."), collapse = "\n"))
    if (length(payload) > MAX_BYTES) stop("a message over 64 MiB cannot cross between the R processes")
    writeBin(c(charToRaw(sprintf("%015d\n", length(payload))), payload), st$out)
    flush(st$out)
  }

  read_n <- function(n) {
    got <- list()
    left <- n
    while (left > 0) {
      b <- readBin(st$inp, "raw", min(left, 1048576))
      if (length(b) == 0L) return(NULL)
      got[[length(got) + 1L]] <- b
      left <- left - length(b)
    }
    do.call(c, got)
  }

  # The next message as a cursor over its lines; NULL when the peer is gone.
  recv <- function() {
    h <- read_n(16L)
    if (is.null(h)) return(NULL)
    n <- suppressWarnings(as.numeric(rawToChar(h[1:15])))
    if (is.na(n) || n < 2 || n > MAX_BYTES || h[16] != as.raw(10L)) stop("a malformed frame")
    b <- read_n(n)
    if (is.null(b)) return(NULL)
    lines <- strsplit(rawToChar(b), "\n", fixed = TRUE)[[1]]
    if (length(lines) < 2L || lines[length(lines)] != ".") stop("a malformed message")
    m <- new.env()
    m$lines <- lines[-length(lines)]
    m$i <- 1L
    m
  }

  proxy <- function(id) {
    force(id)
    function(...) {
      args <- list(...)
      ours(call_peer, paste("f", id), args)
    }
  }

  # fn(...) with the JIT off: how the code under test enters ours (a stub, a proxy, source()),
  # its arguments already evaluated. Small, so the JIT does not compile it either; the result
  # keeps its visibility.
  ours <- function(fn, ...) {
    old <- compiler::enableJIT(0L)
    on.exit(compiler::enableJIT(old))
    fn(...)
  }

  # fn(...) at the JIT level of the code under test (`st$jit`, the level at start).
  theirs <- function(fn, ...) {
    old <- compiler::enableJIT(st$jit)
    on.exit(compiler::enableJIT(old))
    fn(...)
  }

  # Sends a call and waits for its answer, serving the peer's calls (callbacks) meanwhile.
  call_peer <- function(target, args) {
    if (st$dead) stop("the agent's R process is gone (it quit, crashed, or sent a malformed answer)")
    ok <- FALSE
    on.exit(if (!ok) st$dead <- TRUE)
    send(c("C", target, enc(args)))
    repeat {
      m <- recv()
      if (is.null(m)) stop("the agent's R process ended (it quit, crashed or was killed)")
      kind <- m$lines[[1]]
      m$i <- 2L
      if (kind == "C") {
        serve(m)
        next
      }
      if (kind == "R") {
        visible <- m$lines[[2]] == "1"
        m$i <- 3L
        value <- dec(m, proxy)
        output <- dec(m, proxy)
        conds <- dec(m, proxy)
        ok <- TRUE
        replay(output, conds)
        return(if (visible) value else invisible(value))
      }
      if (kind == "E") {
        msg <- dec(m, proxy)
        cls <- dec(m, proxy)
        output <- dec(m, proxy)
        conds <- dec(m, proxy)
        ok <- TRUE
        replay(output, conds)
        stop(condition_of(msg, cls, "error"))
      }
      stop("a malformed answer")
    }
  }

  condition_of <- function(msg, cls, base) {
    msg <- if (is.character(msg) && length(msg) >= 1L) msg[[1]] else "(no message)"
    cls <- if (is.character(cls)) cls[!is.na(cls)] else character()
    cls <- cls[!grepl(DENY_CLASS, cls) & grepl("^[A-Za-z][A-Za-z0-9._]*$", cls)]
    structure(class = unique(c("rb_agent_condition", cls, base, "condition")),
              list(message = msg, call = NULL))
  }

  replay <- function(output, conds) {
    if (is.character(output) && length(output)) cat(output, sep = "\n")
    if (!is.list(conds)) return(invisible())
    for (c in conds) {
      if (!is.list(c) || !is.character(c$kind)) next
      if (identical(c$kind, "warning")) warning(condition_of(c$message, c$class, "warning"))
      if (identical(c$kind, "message")) message(condition_of(c$message, c$class, "message"))
    }
  }

  # Calls `fn` on `args`, answering the peer with its value or error, the printed output and
  # the warnings and messages signalled meanwhile.
  answer <- function(fn, args) {
    conds <- list()
    res <- NULL
    output <- utils::capture.output({
      res <- tryCatch(
        withCallingHandlers(
          list(ok = TRUE, v = theirs(function() withVisible(do.call(fn, args)))),
          warning = function(w) {
            conds[[length(conds) + 1L]] <<- list(kind = "warning",
              message = conditionMessage(w), class = class(w))
            invokeRestart("muffleWarning")
          },
          message = function(w) {
            conds[[length(conds) + 1L]] <<- list(kind = "message",
              message = conditionMessage(w), class = class(w))
            invokeRestart("muffleMessage")
          }),
        error = function(e) list(ok = FALSE, message = conditionMessage(e), class = class(e)))
    })
    reply <- tryCatch(
      if (isTRUE(res$ok)) {
        c("R", if (isTRUE(res$v$visible)) "1" else "0", enc(res$v$value), enc(output), enc(conds))
      } else {
        c("E", enc(as.character(res$message)), enc(as.character(res$class)), enc(output), enc(conds))
      },
      error = function(e) c("E", enc(conditionMessage(e)), enc("rb_bridge_error"), enc(output), enc(list())))
    send(reply)
  }

  serve <- function(m) {
    target <- strsplit(m$lines[[2]], " ", fixed = TRUE)[[1]]
    m$i <- 3L
    args <- tryCatch(dec(m, proxy), error = function(e) e)
    if (inherits(args, "error") || !is.list(args)) {
      return(send(c("E", enc("malformed arguments"), enc("rb_bridge_error"), enc(character()), enc(list()))))
    }
    fn <- tryCatch(resolve(target), error = function(e) e)
    if (inherits(fn, "error") || !is.function(fn)) {
      msg <- if (inherits(fn, "error")) conditionMessage(fn) else "not a function"
      return(send(c("E", enc(msg), enc("rb_bridge_error"), enc(character()), enc(list()))))
    }
    answer(fn, args)
  }

  # What a call names: `f ID` a function of this process's table; on the worker also
  # `n NAME` a global of the agent's and `b WHAT` a builtin.
  resolve <- function(target) {
    if (target[1] == "f") {
      id <- suppressWarnings(as.integer(target[2]))
      if (is.na(id) || id < 1L || id > length(st$fns)) stop("an unknown function handle")
      return(st$fns[[id]])
    }
    if (!isTRUE(st$worker)) stop("the referee serves only its own functions")
    if (target[1] == "n") {
      return(get(unhex(target[2]), envir = globalenv(), mode = "function"))
    }
    if (target[1] == "b") {
      return(switch(target[2],
        source = function(path) {
          base::source(path, local = globalenv())
          globals()
        },
        get = function(name) get(name, envir = globalenv()),
        stop("an unknown builtin")))
    }
    stop("an unknown call target")
  }

  globals <- function() {
    names <- ls(globalenv(), all.names = TRUE)
    names <- names[!startsWith(names, ".rb_")]
    list(names = names,
         fun = vapply(names, function(n) is.function(get(n, envir = globalenv())), NA,
                      USE.NAMES = FALSE))
  }

  worker <- function(a) {
    st$worker <- TRUE
    st$inp <- fifo(a[2], open = "rb", blocking = TRUE)
    st$out <- fifo(a[3], open = "wb", blocking = TRUE)
    repeat {
      m <- tryCatch(recv(), error = function(e) NULL)
      if (is.null(m)) quit(save = "no", status = 0)
      if (m$lines[[1]] == "C") serve(m) else quit(save = "no", status = 0)
    }
  }

  # --- the referee -------------------------------------------------------------------------

  referee <- function(a) {
    st$worker <- FALSE
    held <- normalizePath(a[7], mustWork = FALSE)
    # testthat loads while the worker starts; opening the FIFOs waits for it.
    suppressPackageStartupMessages(library(testthat))
    st$out <- fifo(a[2], open = "wb", blocking = TRUE)
    st$inp <- fifo(a[3], open = "rb", blocking = TRUE)
    env <- new.env(parent = globalenv())
    protected <- unique(c(ls(baseenv(), all.names = TRUE), getNamespaceExports("testthat")))
    bind <- function(g) {
      if (!is.list(g) || !is.character(g$names) || !is.logical(g$fun) ||
          length(g$names) != length(g$fun)) {
        stop("the agent's R process answered the source() call with no list of names")
      }
      for (k in seq_along(g$names)) {
        nm <- g$names[[k]]
        if (is.na(nm) || !nzchar(nm) || nm %in% protected) next
        if (exists(nm, envir = env, inherits = FALSE)) rm(list = nm, envir = env)
        target <- paste("n", hex(nm))
        if (isTRUE(g$fun[[k]])) {
          assign(nm, local({
            t <- target
            function(...) {
              args <- list(...)
              ours(call_peer, t, args)
            }
          }), envir = env)
        } else {
          makeActiveBinding(nm, local({
            n <- nm
            function() ours(call_peer, "b get", list(n))
          }), env)
        }
      }
    }
    original <- base::source
    # Any file but a held-out one (the agent's, or one it could have written) is sourced by
    # the worker, whichever way the test calls source().
    held_file <- function(file) {
      path <- tryCatch(normalizePath(file, mustWork = FALSE), error = function(e) file)
      if (is.character(path) && startsWith(path, paste0(held, "/"))) NULL else path
    }
    guarded <- function(file, local = FALSE, ...) {
      force(file)
      path <- ours(held_file, file)
      if (is.null(path)) {
        return(original(file, local = if (isFALSE(local)) env else local, ...))
      }
      ours(function() bind(call_peer("b source", list(path))))
      invisible(NULL)
    }
    for (where in list(baseenv())) {
      unlockBinding("source", where)
      assign("source", guarded, envir = where)
      lockBinding("source", where)
    }
    assign("source", guarded, envir = env)
    run <- function(path) {
      if (dir.exists(path)) {
        theirs(testthat::test_dir, path, reporter = "silent", env = env,
               stop_on_failure = FALSE, stop_on_warning = FALSE)
      } else {
        theirs(testthat::test_file, path, reporter = "silent", env = env,
               stop_on_failure = FALSE)
      }
    }
    clean <- function(x) gsub("[\t\r\n]+", " ", as.character(x))
    # The first failed expectation's message of each test (what users see as the reason).
    why <- function(res) {
      vapply(unclass(res), function(t) {
        bad <- Filter(function(e) inherits(e, c("expectation_failure", "expectation_error",
                                                "expectation_skip")), t$results)
        if (length(bad)) substr(clean(conditionMessage(bad[[1]])), 1L, 600L) else ""
      }, "")
    }
    rows <- function(res) {
      df <- as.data.frame(res)
      msg <- tryCatch(why(res), error = function(e) character())
      if (length(msg) != nrow(df)) msg <- rep("", nrow(df))
      out <- data.frame(name = clean(paste(df$file, df$test, sep = "::")), failed = df$failed,
                        error = as.integer(df$error), skipped = as.integer(df$skipped),
                        passed = df$passed, message = msg)
      # A file that failed as a whole (an error outside any test, e.g. the agent's file did
      # not source) leaves a row without a test name: its tests count as not run.
      out[!is.na(df$test), , drop = FALSE]
    }
    out <- rows(run(a[4]))
    extra <- tryCatch(rows(run(a[6])), error = function(e) NULL)
    if (!is.null(extra)) out <- rbind(out, extra)
    utils::write.table(out, a[5], sep = "\t", quote = FALSE, row.names = FALSE)
  }
})

local({
  a <- commandArgs(TRUE)
  # From here on our code runs with the JIT off; `theirs` restores the level for the code
  # under test.
  .rb_bridge$st$jit <- compiler::enableJIT(0L)
  if (identical(a[1], "worker")) .rb_bridge$worker(a) else .rb_bridge$referee(a)
})
