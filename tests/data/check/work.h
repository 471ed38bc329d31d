/* How much work one unit of cost.txt is. */
#define UNIT 500000
