"""`gpucloud balance` and `gpucloud topup AMOUNT`."""

from .client import Api, output


def balance(api: Api, args):
    data = api.get("wallet")
    if args.json:
        output(args, data)
        return
    print(f"Balance for compute: ¥{data['compute_balance']}")
    print(f"  cash:  ¥{data['cash']}")
    expiry = f" (expires {data['trial_expires_at']})" if data.get("trial_expires_at") else ""
    print(f"  trial: ¥{data['trial']}{expiry}")
    print(
        f"Spent this month: ¥{data['month_spent']}"
        + (f" of a ¥{data['spending_cap']} cap" if data["spending_cap"] else "")
    )


def topup(api: Api, args):
    data = api.post("topups", {"amount": args.amount})
    if args.json:
        output(args, data)
        return
    print(f"Pay ¥{data['amount']} at: {data['checkout_url']}")
    if data["provider"] == "sandbox":
        print("(sandbox checkout: no real money)")


def register(commands):
    p = commands.add_parser("balance", help="show your wallet balance")
    p.set_defaults(handler=balance)
    p = commands.add_parser("topup", help="start a top-up and print the checkout URL")
    p.add_argument("amount", help="amount in CNY, e.g. 50")
    p.set_defaults(handler=topup)
