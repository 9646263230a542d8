"""`builtin:summaries`: short passages with one-sentence reference summaries, written for this project.

Every passage and summary here is original text made for sark-node's tests and examples (no copied
text), sized so that a small model's greedy one-sentence summary makes ROUGE mean something.
"""

from __future__ import annotations

from typing import Final

INSTRUCTION: Final = "Summarize the following passage in one sentence.\n\n"

# (passage, reference summary)
SUMMARIES: Final[tuple[tuple[str, str], ...]] = (
    (
        "The village bakery opened at five every morning. After the old oven broke in March, the "
        "owners borrowed one from a school kitchen and kept baking bread for the whole winter.",
        "The bakery kept baking all winter with an oven borrowed from a school after its own broke.",
    ),
    (
        "Heavy rain fell on the valley for three days. The river rose over its banks on Sunday, and "
        "volunteers filled sandbags along the main street until the water went down.",
        "Volunteers filled sandbags after three days of rain made the river flood the main street.",
    ),
    (
        "A small robot built by students learned to sort recycling by colour and shape. It now "
        "handles most of the bottles and cans in the campus cafeteria every afternoon.",
        "A student-built robot sorts most of the cafeteria's bottles and cans by colour and shape.",
    ),
    (
        "The city library started lending tools such as drills, ladders and sewing machines. Within "
        "a month, more people had borrowed tools than had borrowed travel guides.",
        "The library's new tool lending became more popular than its travel guides within a month.",
    ),
    (
        "A hiker lost on the ridge at dusk used a phone torch to signal a passing helicopter. The "
        "crew spotted the light and guided her down to the road before midnight.",
        "A lost hiker signalled a helicopter with her phone torch and was guided down before midnight.",
    ),
    (
        "Farmers in the north planted a new kind of wheat that needs less water. In the dry summer "
        "their harvest was almost as large as in a normal year.",
        "A new wheat that needs less water gave northern farmers a near-normal harvest in a dry summer.",
    ),
    (
        "The orchestra could not travel to its concert because of a rail strike, so the musicians "
        "played in the station hall instead, and hundreds of stranded passengers listened.",
        "Stuck by a rail strike, the orchestra played its concert in the station hall for passengers.",
    ),
    (
        "A museum found an old map hidden behind a painting during restoration. Experts believe the "
        "map shows the harbour as it looked two hundred years ago.",
        "Restorers found a two-hundred-year-old map of the harbour hidden behind a museum painting.",
    ),
    (
        "The town replaced its street lamps with lights that dim when nobody is near. The council "
        "says the change cut the electricity bill for lighting by almost half.",
        "New street lights that dim when nobody is near cut the town's lighting bill almost in half.",
    ),
    (
        "A young chess player from the island won the regional championship without losing a game. "
        "She learned to play from her grandfather on the ferry to school.",
        "An island girl who learned chess from her grandfather won the regional title unbeaten.",
    ),
    (
        "Engineers tested a bridge by driving twenty loaded trucks onto it at once. Sensors showed "
        "that it bent less than the design allowed, so it opened to traffic the next day.",
        "The bridge passed a load test with twenty trucks and opened to traffic the next day.",
    ),
    (
        "A school garden grew so many tomatoes this year that the pupils sold the extra at the "
        "weekly market and used the money to buy new books.",
        "Pupils sold their school garden's extra tomatoes at the market and bought new books.",
    ),
    (
        "Divers cleaning the lake found an old bicycle, two phones and a wedding ring. The ring was "
        "returned to its owner, who had lost it swimming ten years earlier.",
        "Divers cleaning the lake found a ring lost ten years before and returned it to its owner.",
    ),
    (
        "The bus company added a late-night route after many nurses said they had no way home after "
        "their shifts. The first week, the buses were full.",
        "A late-night bus route added for nurses going home after shifts was full in its first week.",
    ),
    (
        "A storm knocked out power across the coast for two days. Neighbours shared generators and "
        "cooked together in the community hall until the lines were repaired.",
        "During a two-day blackout after a storm, neighbours shared generators and cooked together.",
    ),
    (
        "Scientists counted the birds on the island and found twice as many puffins as five years "
        "ago, after rats that ate their eggs had been removed.",
        "Puffins on the island doubled in five years after the egg-eating rats were removed.",
    ),
    (
        "A cafe began giving a discount to customers who bring their own cups. Paper cup use fell "
        "by two thirds, and the owner plans to stop selling them next year.",
        "A cafe's discount for own cups cut paper cup use by two thirds.",
    ),
    (
        "The old cinema was about to close when residents raised money to buy it. It now shows films "
        "on weekends and hosts concerts during the week.",
        "Residents saved the old cinema by buying it, and it now shows films and hosts concerts.",
    ),
    (
        "A software bug made the train timetable screens show yesterday's times. Staff wrote the "
        "departures on whiteboards by hand until the screens were fixed at noon.",
        "Staff wrote departures on whiteboards by hand while a bug showed old times on the screens.",
    ),
    (
        "The marathon was moved to an earlier start because of a heat warning. Runners set off at "
        "six, and organisers handed out extra water along the route.",
        "Because of the heat, the marathon started at six and organisers gave out extra water.",
    ),
)
