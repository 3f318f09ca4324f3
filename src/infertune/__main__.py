import sys

QUICK = ("profile", "estimate", "advise")  # they answer from caches: no typer when their flags are plain


def main() -> None:
    verb = sys.argv[1] if len(sys.argv) > 1 else None
    if verb == "doctor":  # the linter's fast path: no typer, rich or pydantic
        from infertune.doctor.cli import main as doctor

        code = doctor(sys.argv[2:])
        if code is not None:
            sys.exit(code)
    elif verb in QUICK:
        from infertune.cli.quick import main as quick

        quick(verb, sys.argv[2:])  # exits when it answered; returns when typer must read the command line
    from infertune.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
