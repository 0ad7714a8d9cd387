"""Runners: a Python or TypeScript snippet with tools defined, its value validated."""

import asyncio

from toolbridge import Bridge, SnippetError

SEATS = {"cus_1": 12}


def get_customer(id: str) -> dict[str, object]:
    return {"id": id, "seats": SEATS[id]}


async def main() -> None:
    async with Bridge(journal="toolbridge.db") as bridge, bridge.run("runners-1") as step:
        # --8<-- [start:python]
        total = await step.sandbox.python(
            "total",
            'customer = await tools.getCustomer("cus_1")\nreturn customer["seats"] * 10',
            tools={"getCustomer": get_customer},
            output=int,
        )
        assert total == 120
        # --8<-- [end:python]

        # --8<-- [start:typescript]
        label = await step.sandbox.typescript(
            "label",
            """
            const customer: { seats: number } = await tools.getCustomer("cus_1");
            return `${customer.seats} seats`;
            """,
            tools={"getCustomer": get_customer},
            output=str,
        )
        assert label == "12 seats"
        # --8<-- [end:typescript]

        # --8<-- [start:definitions]
        # A model loop in the sandbox asks for its own tools' definitions (the ListTools RPC):
        #     client.responses.create(model=model, input=messages, tools=await definitions(format="openai"))
        names = await step.sandbox.python(
            "definitions",
            'return [d["name"] for d in await definitions(format="openai")]',
            tools={"getCustomer": get_customer},
        )
        assert names == ["getCustomer"]
        # --8<-- [end:definitions]

        # --8<-- [start:strict]
        try:
            await step.sandbox.python("as-text", 'return "12"', output=int)
        except SnippetError as error:
            print(error)  # the value does not match output: "12" is not an int
        else:
            raise AssertionError("a string is not an int")
        # --8<-- [end:strict]


asyncio.run(main())
