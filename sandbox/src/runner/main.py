# Entry: `--stdio` selects the stdio transport, anything else is the HTTP one.


def main(args):
    if args[:1] == ["--stdio"]:
        return serve_stdio(args[1:])
    return serve_http(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
